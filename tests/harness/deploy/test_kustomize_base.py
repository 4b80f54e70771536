"""The kustomize base deploy/kubernetes/ is what the harness's renderer gives
(scripts/gen_deploy.py, whose ``--check`` runs in ``make lint``): the committed files
pass the check, an edited, missing or extra file fails it with a diff summary, the
renderer refuses a base it cannot lay out without the nodes, and an overlay renames the
base's images. What the files say: test_manifests.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from csi_harness._internal.core.package_data import MANIFEST_DIR
from csi_harness._internal.core.tools import tool_binary
from csi_harness._internal.deploy.images import DRIVER_IMAGE
from csi_harness._internal.deploy.incluster_objects import render_objects
from csi_harness._internal.deploy.kustomize_base import (
    FILES,
    GENERATED_BY,
    KUSTOMIZATION,
    base_files,
    base_images,
    image_replacements,
    overlay_kustomization,
    split_reference,
)
from csi_harness._internal.deploy.spec import DriverDeployment
from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "gen_deploy.py"


gen_deploy = load_script("gen_deploy.py")


@pytest.fixture
def copy_of_base(tmp_path: Path) -> Path:
    """The committed base, copied: the tests edit the copy."""
    directory = tmp_path / "kubernetes"
    shutil.copytree(MANIFEST_DIR, directory)
    return directory


def check(directory: Path) -> int:
    code: int = gen_deploy.main(["--check", "--dir", str(directory)])
    return code


# -- the committed files ----------------------------------------------------------------


def test_the_committed_base_is_what_the_generator_writes() -> None:
    committed = {p.name: p.read_text() for p in MANIFEST_DIR.glob("*.yaml")}
    assert committed == base_files()
    assert gen_deploy.main(["--check"]) == 0


def test_the_check_passes_in_a_fresh_process_with_another_hash_seed() -> None:
    """As ``make lint`` runs it; a different string hash order must not change a byte."""
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "deploy/kubernetes/ is up to date" in result.stdout


def test_every_generated_file_begins_by_saying_so() -> None:
    for name, text in base_files().items():
        assert text.startswith(f"# {GENERATED_BY}.\n"), name


def test_the_kustomization_lists_every_other_file() -> None:
    files = base_files()
    resources = yaml.safe_load(files[KUSTOMIZATION])["resources"]
    assert resources == [file.name for file in FILES]
    assert sorted(files) == sorted([*resources, KUSTOMIZATION])


# -- staleness ----------------------------------------------------------------------------


def test_an_edited_file_fails_the_check_with_its_diff(
    copy_of_base: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = copy_of_base / "node.yaml"
    node.write_text(node.read_text().replace("--nodeid=$(NODE_NAME)", "--nodeid=worker"))
    assert check(copy_of_base) == 1
    err = capsys.readouterr().err
    assert "is stale (1 of its files differ" in err
    assert "node.yaml: +1 -1" in err
    assert "-            - --nodeid=worker" in err
    assert "+            - --nodeid=$(NODE_NAME)" in err


def test_an_edited_comment_fails_the_check_too(copy_of_base: Path) -> None:
    rbac = copy_of_base / "rbac.yaml"
    rbac.write_text(rbac.read_text() + "# a note of my own\n")
    assert check(copy_of_base) == 1


def test_a_missing_file_fails_the_check(
    copy_of_base: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (copy_of_base / "admin-token.yaml").unlink()
    assert check(copy_of_base) == 1
    assert "admin-token.yaml: +" in capsys.readouterr().err


def test_a_file_the_generator_does_not_write_fails_the_check(
    copy_of_base: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (copy_of_base / "snapshotclass.yaml").write_text("kind: VolumeSnapshotClass\n")
    assert check(copy_of_base) == 1
    assert "snapshotclass.yaml: +0 -1" in capsys.readouterr().err


def test_writing_makes_a_stale_directory_pass_the_check(copy_of_base: Path) -> None:
    (copy_of_base / "node.yaml").write_text("edited\n")
    (copy_of_base / "controller.yaml").unlink()
    (copy_of_base / "snapshotclass.yaml").write_text("kind: VolumeSnapshotClass\n")
    assert gen_deploy.main(["--dir", str(copy_of_base)]) == 0
    assert check(copy_of_base) == 0
    assert not (copy_of_base / "snapshotclass.yaml").exists()


# -- what the renderer cannot lay out without the nodes ----------------------------------


def render_for_any_node(**fields: Any) -> list[dict[str, Any]]:
    return render_objects(
        DriverDeployment(**fields),
        None,
        image=DRIVER_IMAGE,
        sidecar_images={"csi-provisioner": "p:1", "csi-attacher": "a:1", "csi-resizer": "r:1"},
        admin_token="t" * 20,
        generation="base",
    )


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({}, "node pools"),
        ({"node_pool_size": None, "node_pool_sizes": {"worker": "1Gi"}}, "node pools"),
        ({"node_pool_size": None, "zone_pool_size": "1Gi"}, "zone pools"),
        (
            {"node_pool_size": None, "provisioner_mode": "distributed"},
            "distributed provisioning",
        ),
    ],
)
def test_a_deployment_for_any_node_refuses_what_needs_the_nodes(
    fields: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValueError, match=f"for any node cannot have {named}"):
        render_for_any_node(**fields)


def test_without_pools_of_its_own_a_deployment_for_any_node_renders() -> None:
    kinds = [o["kind"] for o in render_for_any_node(node_pool_size=None)]
    assert kinds.count("DaemonSet") == 1 and kinds.count("Deployment") == 1


# -- overlays -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reference", "parts"),
    [
        ("csi-mock.local/csi-mock:dev", ("csi-mock.local/csi-mock", "dev", None)),
        ("registry:5000/a/b", ("registry:5000/a/b", None, None)),
        ("registry:5000/a/b:v1", ("registry:5000/a/b", "v1", None)),
        ("busybox", ("busybox", None, None)),
        ("r.io/x@sha256:ab", ("r.io/x", None, "sha256:ab")),
        ("r.io/x:v1@sha256:ab", ("r.io/x", "v1", "sha256:ab")),
    ],
)
def test_split_reference_tells_a_tag_from_a_registry_port(
    reference: str, parts: tuple[str, str | None, str | None]
) -> None:
    assert split_reference(reference) == parts


def test_image_replacements_rename_only_what_a_cluster_names_otherwise() -> None:
    base = base_images()
    built = {
        "csi-provisioner": "csi-mock.local/csi-provisioner:v6.3.0",
        "csi-attacher": base["csi-attacher"],
        "csi-snapshotter": "csi-mock.local/csi-snapshotter:v8.7.0",  # not in the base
    }
    assert image_replacements(DRIVER_IMAGE, built) == {
        base["csi-provisioner"]: "csi-mock.local/csi-provisioner:v6.3.0"
    }
    upstream = {sidecar: base[sidecar] for sidecar in ("csi-provisioner", "csi-resizer")}
    assert image_replacements("r.example/csi-mock:1", upstream) == {
        DRIVER_IMAGE: "r.example/csi-mock:1"
    }


def test_an_overlay_without_replacements_only_names_the_base() -> None:
    overlay = yaml.safe_load(overlay_kustomization("../base", {}))
    assert overlay["resources"] == ["../base"]
    assert "images" not in overlay


def kubectl() -> str:
    binary = tool_binary("kubectl") or shutil.which("kubectl")
    if binary is None:
        pytest.skip("no kubectl here (make tools builds it): cannot run kustomize")
    return str(binary)


def test_kustomize_renames_every_image_the_overlay_replaces(tmp_path: Path) -> None:
    shutil.copytree(MANIFEST_DIR, tmp_path / "base")
    images = base_images()
    replacements = {
        images["csi-mock"]: "localhost:5000/me/csi-mock:1.0",
        images["csi-provisioner"]: "csi-mock.local/csi-provisioner:v6.3.0",
    }
    (tmp_path / "overlay").mkdir()
    (tmp_path / "overlay" / KUSTOMIZATION).write_text(
        overlay_kustomization("../base", replacements)
    )
    rendered = subprocess.run(
        [kubectl(), "kustomize", str(tmp_path / "overlay")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    seen = sorted(
        container["image"]
        for obj in yaml.safe_load_all(rendered)
        if obj["kind"] in ("Deployment", "DaemonSet")
        for container in (
            obj["spec"]["template"]["spec"].get("initContainers", [])
            + obj["spec"]["template"]["spec"]["containers"]
        )
    )
    assert seen == sorted(
        [
            *["localhost:5000/me/csi-mock:1.0"] * 3,  # controller, node and its init container
            "csi-mock.local/csi-provisioner:v6.3.0",
            images["csi-attacher"],
            images["csi-resizer"],
        ]
    )
