"""Knowing that a kube-scheduler has seen every CSIStorageCapacity change made so far.

kube-scheduler decides from its informers' caches, which follow the API server a
moment behind; on a loaded machine the moment can be a second or more. A test that
changes what a driver publishes, sees the change in the API server and then asks the
scheduler to score can be scored on what was there before. The API server cannot tell
what a scheduler's cache holds, so a barrier asks the scheduler itself:

- once, before the scheduler starts (so that its first list has them): a CSIDriver
  that tracks capacity and that no one serves, and a WaitForFirstConsumer
  StorageClass of it;
- at each wait: a new CSIStorageCapacity of that class for every node, then a probe
  claim of the class and a pod with it pinned to one node. VolumeBinding lets the pod
  onto the node only once the scheduler's cache holds that capacity object (without
  it the class has no capacity anywhere), and then writes the claim's selected-node
  annotation. One watch feeds the scheduler every CSIStorageCapacity in the order the
  API server made the changes, so every change made before the probe's is in its
  cache too.

No one provisions the probe's claim; its pod, claim and capacity are deleted once it
has been placed (the scheduler's binding of the probe then ends with the claim).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import PersistentVolumeClaim, Pod
from lightkube.resources.storage_v1 import CSIDriver, CSIStorageCapacity, StorageClass

from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import SELECTED_NODE, wait_claim

PROBE_REQUEST = "1Mi"
PROBE_CAPACITY = "1Gi"
log = logging.getLogger("csi_harness.capacity_barrier")

EVERY_NODE: dict[str, str] = {}
"""An empty label selector as a capacity's nodeTopology selects every node (a missing
one selects none)."""


def _delete(kube: Client, resource: Any, name: str, namespace: str | None = None) -> None:
    with contextlib.suppress(ApiError):
        kube.delete(resource, name, namespace=namespace, grace_period=0)


@dataclass(frozen=True)
class CapacityBarrier:
    """A driver name and StorageClass that only probes use (``installed`` makes them)."""

    kube: Client
    storage_class: str

    @classmethod
    @contextlib.contextmanager
    def installed(cls, kube: Client) -> Iterator[CapacityBarrier]:
        """Create the barrier's CSIDriver and StorageClass for the block; start the
        schedulers it serves inside it."""
        name = f"capacity-barrier-{secrets.token_hex(4)}.csi-harness.example"
        objects.create(
            kube,
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSIDriver",
                "metadata": {"name": name},
                "spec": {"attachRequired": False, "storageCapacity": True},
            },
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": name},
                "provisioner": name,
                "volumeBindingMode": "WaitForFirstConsumer",
            },
        )
        try:
            yield cls(kube, name)
        finally:
            _delete(kube, StorageClass, name)
            _delete(kube, CSIDriver, name)

    def wait_seen(self, scheduler: str, namespace: str, node: str, timeout: float = 60) -> None:
        """Wait until ``scheduler`` (a schedulerName of a scheduler started inside
        ``installed``) has seen every CSIStorageCapacity change made before the call;
        its probe is pinned to ``node``, one the scheduler may place a pod of
        ``namespace`` on."""
        probe = f"capacity-barrier-{secrets.token_hex(3)}"
        capacity = objects.storage_capacity(
            namespace, self.storage_class, EVERY_NODE, PROBE_CAPACITY
        )
        capacity["metadata"] = {"name": probe, "namespace": namespace}
        pod = objects.pod(probe, namespace, claims=[probe], nodes=[node])
        pod["spec"]["schedulerName"] = scheduler
        started = time.monotonic()
        try:
            objects.create(
                self.kube,
                capacity,
                objects.claim(probe, namespace, PROBE_REQUEST, self.storage_class),
                pod,
            )
            wait_claim(
                self.kube,
                probe,
                namespace,
                lambda claim: (
                    SELECTED_NODE in ((claim.metadata and claim.metadata.annotations) or {})
                ),
                what=(
                    f"kube-scheduler {scheduler} to place probe pod {probe}, which it can "
                    f"once its cache holds CSIStorageCapacity {probe}"
                ),
                timeout=timeout,
            )
            log.info("%s has seen %s after %.2f s", scheduler, probe, time.monotonic() - started)
        finally:
            _delete(self.kube, Pod, probe, namespace)
            _delete(self.kube, PersistentVolumeClaim, probe, namespace)
            _delete(self.kube, CSIStorageCapacity, probe, namespace)
