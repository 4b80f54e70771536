"""Emptying a test's namespace in the order the driver needs."""

from __future__ import annotations

import contextlib

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import PersistentVolume, PersistentVolumeClaim, Pod

from csi_harness._internal.core.waiting import wait_for


def empty_namespace(kube: Client, namespace: str, *, timeout: float = 90) -> None:
    """Delete the namespace's pods (at once) and claims, and wait until the driver
    deleted their volumes: nothing of the namespace is left on the driver, so it can
    be removed (or the next part of a test starts from empty pools)."""
    for pod in kube.list(Pod, namespace=namespace):
        if pod.metadata and pod.metadata.name:
            with contextlib.suppress(ApiError):
                kube.delete(Pod, pod.metadata.name, namespace=namespace, grace_period=0)
    for claim in kube.list(PersistentVolumeClaim, namespace=namespace):
        if claim.metadata and claim.metadata.name:
            with contextlib.suppress(ApiError):
                kube.delete(PersistentVolumeClaim, claim.metadata.name, namespace=namespace)

    def volumes_gone() -> tuple[bool, list[str]]:
        left = [
            str(pv.metadata.name if pv.metadata else "?")
            for pv in kube.list(PersistentVolume)
            if pv.spec and pv.spec.claimRef and pv.spec.claimRef.namespace == namespace
        ]
        left += [
            f"pvc/{c.metadata.name if c.metadata else '?'}"
            for c in kube.list(PersistentVolumeClaim, namespace=namespace)
        ]
        return not left, left

    wait_for(
        f"the volumes of namespace {namespace} to be deleted",
        volumes_gone,
        timeout=timeout,
        interval=0.5,
    )
