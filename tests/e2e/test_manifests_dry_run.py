"""The API server accepts every in-cluster manifest (deploy/kubernetes/): each object in a
server-side apply dry run (admission, defaulting and schema validation, nothing
stored), and the whole kustomization through kubectl with strict field validation.
So does every object the harness renders for an in-cluster deployment
(``csi_harness._internal.deploy.incluster_objects``), in either provisioning mode.

Objects the local cluster already has (the csi-mock namespace, the CSIDriver, the
StorageClasses) must pass too: the apply takes their fields over (force) in the dry
run only."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from lightkube import Client, KubeConfig, codecs
from lightkube.core.exceptions import ApiError
from lightkube.core.resource import NamespacedResource
from lightkube.resources.apps_v1 import DaemonSet, Deployment
from lightkube.resources.core_v1 import ConfigMap, Namespace

from csi_harness._internal.core.package_data import MANIFEST_DIR
from csi_harness._internal.core.tools import tool_path
from csi_harness._internal.deploy.incluster_layout import (
    CONTROLLER_DEPLOYMENT,
    NODE_DAEMONSET,
)
from csi_harness._internal.deploy.incluster_objects import render_objects
from csi_harness._internal.deploy.spec import DRIVER_NAMESPACE, DriverDeployment
from csi_harness._internal.kube.nodes import ClusterNode
from csi_harness._internal.providers.local.cluster import LocalCluster

pytestmark = pytest.mark.e2e

FIELD_MANAGER = "csi-harness-manifests"
KUSTOMIZATION = MANIFEST_DIR / "kustomization.yaml"
MANIFEST_FILES = sorted(p for p in MANIFEST_DIR.glob("*.yaml") if p != KUSTOMIZATION)


@pytest.fixture(scope="module")
def kube(local_cluster: LocalCluster) -> Client:
    return Client(KubeConfig.from_file(local_cluster.kubeconfig), field_manager=FIELD_MANAGER)


@pytest.fixture(scope="module")
def driver_namespace(kube: Client) -> Iterator[str]:
    """Namespaced dry runs need the namespace to exist: create it for real if missing
    (the local cluster makes it for its driver), and remove it afterwards if we did."""
    created = False
    try:
        kube.get(Namespace, DRIVER_NAMESPACE)
    except ApiError as exc:
        if exc.status.code != 404:
            raise
        kube.create(cast(Namespace, Namespace.from_dict({"metadata": {"name": DRIVER_NAMESPACE}})))
        created = True
    yield DRIVER_NAMESPACE
    if created:
        kube.delete(Namespace, DRIVER_NAMESPACE)


def objects(path: Path) -> list[Any]:
    return list(codecs.load_all_yaml(path.read_text()))


@pytest.mark.parametrize("path", MANIFEST_FILES, ids=lambda p: p.name)
def test_server_side_apply_dry_run_accepts_every_object(
    kube: Client, driver_namespace: str, path: Path
) -> None:
    for obj in objects(path):
        try:
            applied = kube.apply(obj, dry_run=True, field_manager=FIELD_MANAGER, force=True)
        except ApiError as exc:
            pytest.fail(
                f"{path.name}: {obj.kind}/{obj.metadata.name} refused: {exc.status.message}"
            )
        assert applied.metadata.name == obj.metadata.name
        if isinstance(obj, NamespacedResource):
            assert applied.metadata.namespace == driver_namespace


@pytest.mark.parametrize("mode", ["central", "distributed"])
def test_server_side_apply_dry_run_accepts_every_rendered_in_cluster_object(
    kube: Client, driver_namespace: str, mode: str
) -> None:
    rendered = render_objects(
        DriverDeployment(provisioner_mode=mode),
        [ClusterNode("worker", "zone-a", True), ClusterNode("worker2", "zone-b", True)],
        image="csi-mock.local/csi-mock:dev",
        sidecar_images={
            sidecar: f"csi-mock.local/{sidecar}:v0"
            for sidecar in ("csi-provisioner", "csi-attacher", "csi-resizer")
        },
        admin_token="dry-run-token",
        generation="1",
    )
    applied = set()
    containers = set()
    for raw in rendered:
        obj = codecs.from_dict(raw)
        try:
            kube.apply(obj, dry_run=True, field_manager=FIELD_MANAGER, force=True)
        except ApiError as exc:
            pytest.fail(f"{raw['kind']}/{raw['metadata']['name']} refused: {exc.status.message}")
        applied.add((raw["kind"], raw["metadata"]["name"]))
        if raw["kind"] in ("Deployment", "DaemonSet"):
            containers |= {c["name"] for c in raw["spec"]["template"]["spec"]["containers"]}
    # The resizer has no per-node mode: it runs with the central controller only.
    assert ("csi-resizer" in containers) == (mode == "central")
    assert (("Deployment", CONTROLLER_DEPLOYMENT) in applied) == (mode == "central")


@pytest.mark.parametrize(
    ("resource", "name"),
    [
        (ConfigMap, "csi-mock-config"),
        (Deployment, CONTROLLER_DEPLOYMENT),
        (DaemonSet, NODE_DAEMONSET),
    ],
)
def test_dry_run_stores_nothing(
    kube: Client, driver_namespace: str, resource: Any, name: str
) -> None:
    for path in MANIFEST_FILES:
        for obj in objects(path):
            if isinstance(obj, resource) and obj.metadata.name == name:
                kube.apply(obj, dry_run=True, field_manager=FIELD_MANAGER, force=True)
    with pytest.raises(ApiError) as missing:
        kube.get(resource, name, namespace=driver_namespace)
    assert missing.value.status.code == 404


def test_kubectl_applies_the_kustomization_with_strict_validation(
    local_cluster: LocalCluster, driver_namespace: str
) -> None:
    kubectl = tool_path("kubectl")
    result = subprocess.run(
        [
            kubectl,
            "--kubeconfig",
            str(local_cluster.kubeconfig),
            "apply",
            "-k",
            str(MANIFEST_DIR),
            "--server-side",
            "--dry-run=server",
            "--force-conflicts",
            f"--field-manager={FIELD_MANAGER}",
            "--validate=strict",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    # No deprecation or Pod Security warnings either.
    assert "Warning" not in result.stderr, result.stderr
    reported = [line for line in result.stdout.splitlines() if line.strip()]
    kustomized = yaml.safe_load(KUSTOMIZATION.read_text())["resources"]
    expected = sum(len(objects(MANIFEST_DIR / name)) for name in kustomized)
    assert len(reported) == expected, result.stdout
    assert all(line.endswith("(server dry run)") for line in reported), result.stdout
