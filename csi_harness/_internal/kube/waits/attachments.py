"""Waiting for a volume's VolumeAttachments to appear, attach, or go."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lightkube import Client
from lightkube.resources.storage_v1 import VolumeAttachment

from csi_harness._internal.kube.watching import Kube, watch_until


def _of_volume(attachments: Iterable[VolumeAttachment], pv_name: str) -> list[VolumeAttachment]:
    # spec.source is not a field selector of VolumeAttachments: filter here.
    return [va for va in attachments if va.spec.source.persistentVolumeName == pv_name]


def volume_attachments(kube: Client, pv_name: str) -> list[VolumeAttachment]:
    """The VolumeAttachments of one PersistentVolume."""
    return _of_volume(kube.list(VolumeAttachment), pv_name)


def _describe_attachments(attachments: list[VolumeAttachment]) -> str:
    if not attachments:
        return "no VolumeAttachment"
    return "; ".join(
        f"{va.metadata.name if va.metadata else '?'} node={va.spec.nodeName}"
        f" attached={va.status.attached if va.status else None}"
        f" error={va.status.attachError.message if va.status and va.status.attachError else None}"
        for va in attachments
    )


def wait_volume_attachment(
    kube: Kube, pv_name: str, *, attached: bool | None = None, timeout: float = 60
) -> VolumeAttachment:
    """Wait for a VolumeAttachment of the PV (with ``status.attached`` equal to
    ``attached``, if given); return it."""

    def check(everyone: dict[str, VolumeAttachment]) -> tuple[bool, Any]:
        found = _of_volume(everyone.values(), pv_name)
        for va in found:
            is_attached = bool(va.status and va.status.attached)
            if attached is None or is_attached == attached:
                return True, va
        return False, _describe_attachments(found)

    what = f"a VolumeAttachment of {pv_name}" + (
        f" with attached={attached}" if attached is not None else ""
    )
    va: VolumeAttachment = watch_until(
        kube, VolumeAttachment, what=what, check=check, timeout=timeout
    )
    return va


def wait_volume_attachments_gone(kube: Kube, pv_name: str, timeout: float = 90) -> None:
    def check(everyone: dict[str, VolumeAttachment]) -> tuple[bool, str]:
        found = _of_volume(everyone.values(), pv_name)
        return not found, _describe_attachments(found)

    watch_until(
        kube,
        VolumeAttachment,
        what=f"the VolumeAttachments of {pv_name} to be deleted",
        check=check,
        timeout=timeout,
    )
