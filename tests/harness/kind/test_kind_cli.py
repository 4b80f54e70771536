"""KindCli builds the kind and kubectl command lines the in-cluster deployment needs;
a fake runner records them, so no kind, Docker or cluster is involved."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from csi_harness._internal.core.commands import CommandFailed
from csi_harness._internal.core.package_data import KIND_CONFIG_DIR, TOOLS_SCRIPT
from csi_harness._internal.providers.kind.kind_cli import DRIVER_IMAGE, ImageArchive, KindCli

KIND = "/tools/bin/kind"
KUBECTL = "/tools/bin/kubectl"


@dataclass
class FakeRunner:
    """Records every command; answers `tools/build.sh path NAME` and anything in `outputs`."""

    outputs: dict[tuple[str, ...], str] = field(default_factory=dict)
    calls: list[tuple[list[str], Path | None]] = field(default_factory=list)

    def __call__(self, argv: Sequence[str], *, cwd: Path | None = None) -> str:
        self.calls.append((list(argv), cwd))
        if list(argv[:3]) == ["bash", str(TOOLS_SCRIPT), "path"]:
            return {"kind": KIND + "\n", "kubectl": KUBECTL + "\n"}[argv[3]]
        return self.outputs.get(tuple(argv), "")

    @property
    def argvs(self) -> list[list[str]]:
        return [argv for argv, _ in self.calls]


def cluster(tmp_path: Path, runner: FakeRunner, **kwargs: object) -> KindCli:
    return KindCli(
        "csi",
        KIND_CONFIG_DIR / "two-nodes.yaml",
        kubeconfig=tmp_path / "kind-csi" / "kubeconfig",
        runner=runner,
        **kwargs,  # type: ignore[arg-type]
    )


# -- create --------------------------------------------------------------------------


def test_create_passes_name_kubeconfig_wait_and_the_absolute_config(tmp_path: Path) -> None:
    runner = FakeRunner()
    cluster(tmp_path, runner).create()
    assert runner.calls[-1] == (
        [
            KIND,
            "create",
            "cluster",
            "--name",
            "csi",
            "--kubeconfig",
            str(tmp_path / "kind-csi" / "kubeconfig"),
            "--wait",
            "120s",
            "--config",
            str(KIND_CONFIG_DIR / "two-nodes.yaml"),
        ],
        KIND_CONFIG_DIR,
    )


def test_create_runs_kind_from_the_config_directory_so_relative_mounts_resolve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(KIND_CONFIG_DIR.parent)
    runner = FakeRunner()
    KindCli(
        "csi",
        Path("kind-config/capacity-scoring.yaml"),
        kubeconfig=tmp_path / "kubeconfig",
        runner=runner,
    ).create()
    argv, cwd = runner.calls[-1]
    assert argv[argv.index("--config") + 1] == str(KIND_CONFIG_DIR / "capacity-scoring.yaml")
    assert cwd == KIND_CONFIG_DIR


def test_create_makes_the_kubeconfig_directory(tmp_path: Path) -> None:
    cluster(tmp_path, FakeRunner()).create()
    assert (tmp_path / "kind-csi").is_dir()


def test_create_passes_a_node_image_only_when_given(tmp_path: Path) -> None:
    runner = FakeRunner()
    cluster(tmp_path, runner).create()
    assert "--image" not in runner.argvs[-1]
    cluster(tmp_path, runner, node_image="kindest/node:v1.37.0").create()
    assert runner.argvs[-1][-2:] == ["--image", "kindest/node:v1.37.0"]


def test_create_without_a_config_file_uses_kinds_default_cluster(tmp_path: Path) -> None:
    runner = FakeRunner()
    KindCli("plain", kubeconfig=tmp_path / "kc", runner=runner).create()
    argv, cwd = runner.calls[-1]
    assert "--config" not in argv
    assert cwd is None


def test_default_kubeconfig_is_a_file_of_its_own_per_cluster() -> None:
    assert KindCli("csi").kubeconfig == Path("/var/lib/csi-harness/kind-csi/kubeconfig")


# -- images --------------------------------------------------------------------------


def test_load_image_loads_the_driver_image_from_docker_by_default(tmp_path: Path) -> None:
    runner = FakeRunner()
    cluster(tmp_path, runner).load_image()
    assert runner.argvs[-1] == [KIND, "load", "docker-image", DRIVER_IMAGE, "--name", "csi"]
    assert DRIVER_IMAGE == "csi-mock.local/csi-mock:dev"


def test_load_image_loads_an_archive_with_image_archive(tmp_path: Path) -> None:
    runner = FakeRunner()
    archive = tmp_path / "csi-mock.tar"
    cluster(tmp_path, runner).load_image(ImageArchive(archive))
    assert runner.argvs[-1] == [KIND, "load", "image-archive", str(archive), "--name", "csi"]


def test_load_image_can_target_some_nodes(tmp_path: Path) -> None:
    runner = FakeRunner()
    cluster(tmp_path, runner).load_image("other:1", nodes=["csi-worker", "csi-worker2"])
    assert runner.argvs[-1] == [
        KIND,
        "load",
        "docker-image",
        "other:1",
        "--name",
        "csi",
        "--nodes",
        "csi-worker,csi-worker2",
    ]


# -- delete, exists ------------------------------------------------------------------


def test_delete_deletes_the_cluster_and_its_kubeconfig(tmp_path: Path) -> None:
    runner = FakeRunner()
    kind_cluster = cluster(tmp_path, runner)
    kind_cluster.create()
    kind_cluster.kubeconfig.write_text("apiVersion: v1\n")
    kind_cluster.delete()
    assert runner.argvs[-1] == [
        KIND,
        "delete",
        "cluster",
        "--name",
        "csi",
        "--kubeconfig",
        str(kind_cluster.kubeconfig),
    ]
    assert not kind_cluster.kubeconfig.parent.exists()


def test_delete_keeps_a_kubeconfig_directory_with_other_files(tmp_path: Path) -> None:
    kind_cluster = cluster(tmp_path, FakeRunner())
    kind_cluster.kubeconfig.parent.mkdir(parents=True)
    (kind_cluster.kubeconfig.parent / "notes").write_text("keep")
    kind_cluster.delete()
    assert (kind_cluster.kubeconfig.parent / "notes").exists()


def test_delete_keeps_the_kubeconfig_when_kind_fails(tmp_path: Path) -> None:
    def failing(argv: Sequence[str], *, cwd: Path | None = None) -> str:
        raise CommandFailed(argv, 1, "failed to list nodes")

    kind_cluster = KindCli(
        "csi", kubeconfig=tmp_path / "kind-csi" / "kubeconfig", kind=KIND, runner=failing
    )
    kind_cluster.kubeconfig.parent.mkdir(parents=True)
    kind_cluster.kubeconfig.write_text("apiVersion: v1\n")
    with pytest.raises(CommandFailed, match="failed to list nodes"):
        kind_cluster.delete()
    assert kind_cluster.kubeconfig.exists()


def test_exists_reads_kind_get_clusters(tmp_path: Path) -> None:
    runner = FakeRunner(outputs={(KIND, "get", "clusters"): "csi-other\ncsi\n"})
    assert cluster(tmp_path, runner).exists()
    runner.outputs[(KIND, "get", "clusters")] = "csi-other\n"
    assert not cluster(tmp_path, runner).exists()


# -- binaries ------------------------------------------------------------------------


def test_binaries_come_from_the_build_script_path_once(tmp_path: Path) -> None:
    runner = FakeRunner()
    kind_cluster = cluster(tmp_path, runner)
    kind_cluster.create()
    kind_cluster.delete()
    lookups = [argv for argv in runner.argvs if argv[0] == "bash"]
    assert lookups == [["bash", str(TOOLS_SCRIPT), "path", "kind"]]


def test_given_binaries_are_used_without_a_lookup(tmp_path: Path) -> None:
    runner = FakeRunner()
    kind_cluster = cluster(tmp_path, runner, kind="/opt/kind")
    kind_cluster.create()
    kind_cluster.delete()
    assert [argv[0] for argv in runner.argvs] == ["/opt/kind", "/opt/kind"]
