"""fsGroup policies (CSIDriver.spec.fsGroupPolicy) end to end: after NodePublishVolume
the kubelet gives a volume to the pod's fsGroup (group ownership and setgid
directories) with ``File``, with ``ReadWriteOnceWithFSType`` (Kubernetes' default) only
for a ReadWriteOnce volume with an fsType, and never with ``None``. The policy may
change on a running driver, and the next mount follows it.

As upstream's mock deployment (external-provisioner ``--default-fstype=ext4``), the
volumes have an fsType: their StorageClass asks for ext4 (csi-mock bind-mounts a
directory whatever the fsType). Each pod runs once on the node with a real kubelet,
writes a file in a new directory of its volume and reports the file's group: the
fsGroup when the kubelet applied it, root's (0) when not.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

import pytest
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.storage_v1 import CSIDriver, StorageClass
from lightkube.types import PatchType

from csi_harness._internal.deploy.csidriver import FsGroupPolicy
from csi_harness._internal.deploy.spec import storage_class_objects
from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import termination_message, wait_pod_succeeded
from csi_harness._internal.providers.base import Driver

pytestmark = [pytest.mark.e2e]

FEATURE = "fsGroup policy"
FILE = "csi_fsgroup_policy.go"
DEFAULT = FsGroupPolicy.READ_WRITE_ONCE_WITH_FS_TYPE
NONE = FsGroupPolicy.NONE
FILE_POLICY = FsGroupPolicy.FILE
ROOT_GROUP = "0"
LABELS = {DEFAULT: "default", FILE_POLICY: "File", NONE: "None"}
"""Upstream's names of the policies, for test ids."""
WRITE_AND_REPORT = (
    "mkdir /mnt/claim-0/fsgroup && echo contents > /mnt/claim-0/fsgroup/file"
    " && stat -c %g /mnt/claim-0/fsgroup/file > /dev/termination-log"
)
"""The group of a file the pod writes in a directory it creates in the volume."""


@pytest.fixture
def ext4_class(kube: Client, driver: Driver) -> Iterator[str]:
    """A StorageClass of the test's driver whose volumes have fsType ext4."""
    (base,) = storage_class_objects(
        driver.spec.model_copy(update={"storage_classes": ["csi-mock"]})
    )
    name = driver.spec.storage_class("csi-mock-ext4")
    base["metadata"]["name"] = name
    base["parameters"]["csi.storage.k8s.io/fstype"] = "ext4"
    objects.create(kube, base)
    try:
        yield name
    finally:
        with contextlib.suppress(ApiError):
            kube.delete(StorageClass, name)


def group_of_written_file(
    kube: Client, namespace: str, node: str, storage_class: str, name: str = "app"
) -> str:
    """Run pod ``name`` with a new claim of ``storage_class`` (same name) and a random
    fsGroup; return the group of the file it wrote: "fsGroup" when it is the pod's."""
    fs_group = random.randrange(1024, 21024)
    pod = objects.pod(
        name, namespace, claims=[name], nodes=[node], command=["sh", "-c", WRITE_AND_REPORT]
    )
    pod["spec"]["securityContext"] = {"fsGroup": fs_group}
    objects.create(kube, objects.claim(name, namespace, "1Gi", storage_class), pod)
    written = termination_message(wait_pod_succeeded(kube, name, namespace)).strip()
    return "fsGroup" if written == str(fs_group) else written


def set_fs_group_policy(kube: Client, driver: Driver, policy: FsGroupPolicy) -> None:
    kube.patch(
        CSIDriver,
        driver.spec.name,
        {"spec": {"fsGroupPolicy": str(policy)}},
        patch_type=PatchType.MERGE,
    )
    spec = kube.get(CSIDriver, driver.spec.name).spec
    assert spec is not None and spec.fsGroupPolicy == str(policy), spec


def expected_group(policy: FsGroupPolicy) -> str:
    # A ReadWriteOnce ext4 volume: only None leaves it to root.
    return ROOT_GROUP if policy is NONE else "fsGroup"


@pytest.mark.parametrize(
    "policy",
    [
        pytest.param(
            policy,
            marks=[
                pytest.mark.driver(fs_group_policy=policy, storage_capacity=False),
                pytest.mark.upstream(FILE, title),
            ],
            id=LABELS[policy],
        )
        for policy, title in (
            (DEFAULT, "should modify fsGroup if fsGroupPolicy=default"),
            (FILE_POLICY, "should modify fsGroup if fsGroupPolicy=File"),
            (NONE, "should not modify fsGroup if fsGroupPolicy=None"),
        )
    ],
)
@pytest.mark.scenario(FEATURE, "the volume is given to the pod's fsGroup unless the policy is None")
def test_fs_group_policy_decides_whether_the_volume_gets_the_pods_fs_group(
    kube: Client,
    namespace: str,
    driver: Driver,
    pod_node: str,
    ext4_class: str,
    policy: FsGroupPolicy,
) -> None:
    assert group_of_written_file(kube, namespace, pod_node, ext4_class) == expected_group(policy)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param(
            before,
            after,
            marks=[
                pytest.mark.driver(fs_group_policy=before, storage_capacity=False),
                pytest.mark.upstream(FILE, title),
            ],
            id=f"{LABELS[before]}-to-{LABELS[after]}",
        )
        for before, after, title in (
            (NONE, FILE_POLICY, "should update fsGroup if update from None to File"),
            (NONE, DEFAULT, "should update fsGroup if update from None to default"),
            (FILE_POLICY, NONE, "should not update fsGroup if update from File to None"),
            (FILE_POLICY, DEFAULT, "should update fsGroup if update from File to default"),
            # Upstream's spelling.
            (DEFAULT, NONE, "should not update fsGroup if update from detault to None"),
            (DEFAULT, FILE_POLICY, "should update fsGroup if update from detault to File"),
        )
    ],
)
@pytest.mark.scenario(FEATURE, "fsGroupPolicy changed on a running driver: the next mount follows")
def test_fs_group_policy_change_applies_to_the_next_mount(
    kube: Client,
    namespace: str,
    driver: Driver,
    pod_node: str,
    ext4_class: str,
    before: FsGroupPolicy,
    after: FsGroupPolicy,
) -> None:
    group = group_of_written_file(kube, namespace, pod_node, ext4_class, "before")
    assert group == expected_group(before)
    # The kubelet reads the CSIDriver from its informer at every mount, which the next
    # pod reaches only after scheduling and provisioning (upstream retries here).
    set_fs_group_policy(kube, driver, after)
    group = group_of_written_file(kube, namespace, pod_node, ext4_class, "after")
    assert group == expected_group(after)
