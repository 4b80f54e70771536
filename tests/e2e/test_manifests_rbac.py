"""The API server's own RBAC evaluation of deploy/kubernetes/rbac.yaml, applied for real:
SubjectAccessReviews for the controller's and the node plugin's ServiceAccounts. The
sidecars of the local cluster run with their own certificates, so these objects change
nothing for it. They stay until the session's cluster goes: under pytest-xdist each
worker that runs some of these tests applies them (the apply is idempotent), and a
worker deleting them at the end of its share denied another's review still running
(session 26's CI run: "watch pods" refused once)."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import Client, KubeConfig, codecs
from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewSpec
from lightkube.resources.authorization_v1 import SubjectAccessReview
from lightkube.resources.core_v1 import Namespace

from csi_harness._internal.core.package_data import MANIFEST_DIR
from csi_harness._internal.deploy.spec import DRIVER_NAMESPACE
from csi_harness._internal.providers.local.cluster import LocalCluster

pytestmark = pytest.mark.e2e

FIELD_MANAGER = "csi-harness-manifests"
CONTROLLER = "csi-mock-controller"
NODE = "csi-mock-node"


@pytest.fixture(scope="module")
def kube(local_cluster: LocalCluster) -> Client:
    return Client(KubeConfig.from_file(local_cluster.kubeconfig), field_manager=FIELD_MANAGER)


@pytest.fixture(scope="module")
def rbac(kube: Client) -> None:
    kube.get(Namespace, DRIVER_NAMESPACE)  # the local cluster made it for its driver
    objects: list[Any] = list(codecs.load_all_yaml((MANIFEST_DIR / "rbac.yaml").read_text()))
    for obj in objects:
        kube.apply(obj, field_manager=FIELD_MANAGER, force=True)


def allowed(
    kube: Client, account: str, verb: str, resource: str, group: str = "", namespace: str = ""
) -> bool:
    """``resource`` may name a subresource: "persistentvolumeclaims/status"."""
    resource, _, subresource = resource.partition("/")
    review = SubjectAccessReview(
        spec=SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{DRIVER_NAMESPACE}:{account}",
            groups=["system:serviceaccounts", f"system:serviceaccounts:{DRIVER_NAMESPACE}"],
            resourceAttributes=ResourceAttributes(
                verb=verb,
                group=group,
                resource=resource,
                subresource=subresource or None,
                namespace=namespace or None,
            ),
        )
    )
    result = kube.create(review)
    assert result.status is not None
    return bool(result.status.allowed)


@pytest.mark.usefixtures("rbac")
@pytest.mark.parametrize(
    ("verb", "resource", "group", "namespace"),
    [
        # external-provisioner, publishing capacity owned by its Deployment
        ("create", "csistoragecapacities", "storage.k8s.io", DRIVER_NAMESPACE),
        ("update", "csistoragecapacities", "storage.k8s.io", DRIVER_NAMESPACE),
        ("delete", "csistoragecapacities", "storage.k8s.io", DRIVER_NAMESPACE),
        ("get", "pods", "", DRIVER_NAMESPACE),
        ("get", "replicasets", "apps", DRIVER_NAMESPACE),
        ("create", "persistentvolumes", "", ""),
        ("update", "persistentvolumeclaims", "", "default"),
        ("list", "csinodes", "storage.k8s.io", ""),
        ("create", "leases", "coordination.k8s.io", DRIVER_NAMESPACE),
        # external-attacher
        ("patch", "volumeattachments", "storage.k8s.io", ""),
        ("patch", "volumeattachments/status", "storage.k8s.io", ""),
        # external-resizer
        ("patch", "persistentvolumes", "", ""),
        ("watch", "persistentvolumeclaims", "", "default"),
        ("patch", "persistentvolumeclaims/status", "", "default"),
        ("list", "pods", "", "default"),
        ("watch", "pods", "", "default"),
        ("patch", "events", "", "default"),
        ("watch", "volumeattributesclasses", "storage.k8s.io", ""),
        # external-provisioner: a restore's snapshot, a claim's attributes class.
        ("update", "volumesnapshots", "snapshot.storage.k8s.io", "default"),
        ("get", "volumeattributesclasses", "storage.k8s.io", ""),
        # csi-snapshotter
        ("watch", "volumesnapshotclasses", "snapshot.storage.k8s.io", ""),
        ("patch", "volumesnapshotcontents", "snapshot.storage.k8s.io", ""),
        ("update", "volumesnapshotcontents/status", "snapshot.storage.k8s.io", ""),
        # csi-snapshotter: the secret a VolumeSnapshotClass names, by name only.
        ("get", "secrets", "", "default"),
    ],
)
def test_controller_sidecars_are_allowed(
    kube: Client, verb: str, resource: str, group: str, namespace: str
) -> None:
    assert allowed(kube, CONTROLLER, verb, resource, group, namespace)


@pytest.mark.usefixtures("rbac")
@pytest.mark.parametrize(
    ("account", "verb", "resource", "group", "namespace"),
    [
        (CONTROLLER, "create", "csistoragecapacities", "storage.k8s.io", "default"),
        (CONTROLLER, "create", "leases", "coordination.k8s.io", "default"),
        (CONTROLLER, "list", "secrets", "", DRIVER_NAMESPACE),
        # The resizer patches a claim's status, never rewrites it, nor touches pods.
        (CONTROLLER, "update", "persistentvolumeclaims/status", "", "default"),
        (CONTROLLER, "patch", "pods", "", "default"),
        # csi-snapshotter acts on contents; VolumeSnapshots are the snapshot-controller's.
        (CONTROLLER, "create", "volumesnapshotcontents", "snapshot.storage.k8s.io", ""),
        (CONTROLLER, "patch", "volumesnapshots/status", "snapshot.storage.k8s.io", "default"),
        (NODE, "patch", "persistentvolumeclaims/status", "", "default"),
        (NODE, "list", "nodes", "", ""),
        (NODE, "get", "pods", "", DRIVER_NAMESPACE),
    ],
)
def test_nothing_beyond_that_is_allowed(
    kube: Client, account: str, verb: str, resource: str, group: str, namespace: str
) -> None:
    assert not allowed(kube, account, verb, resource, group, namespace)
