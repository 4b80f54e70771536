"""The CSIDriver object's fields a deployment chooses, typed as Kubernetes validates them
(``storage.k8s.io/v1`` CSIDriverSpec), so a bad value is refused naming the field before
anything reaches a cluster."""

from __future__ import annotations

import enum

from pydantic import BaseModel, ConfigDict, Field

TOKEN_MIN_EXPIRATION_SECONDS = 600
"""The API server refuses a tokenRequests entry expiring sooner (10 minutes)."""
TOKEN_MAX_EXPIRATION_SECONDS = (1 << 32) - 1


class FsGroupPolicy(enum.StrEnum):
    NONE = "None"
    """The kubelet never changes the volume's ownership for a pod's fsGroup."""
    FILE = "File"
    """The kubelet applies fsGroup to the volume's files (csi-mock's default)."""
    READ_WRITE_ONCE_WITH_FS_TYPE = "ReadWriteOnceWithFSType"
    """Only for a ReadWriteOnce volume with an fsType (Kubernetes' default)."""


class VolumeLifecycleMode(enum.StrEnum):
    PERSISTENT = "Persistent"
    EPHEMERAL = "Ephemeral"
    """CSI inline ephemeral volumes in a pod spec."""


class TokenRequest(BaseModel):
    """One service account token the kubelet passes in NodePublishVolume's volume_context
    (``csi.storage.k8s.io/serviceAccount.tokens``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    audience: str = ""
    """The token's audience; empty: the API server's own."""
    expiration_seconds: int | None = Field(
        None, ge=TOKEN_MIN_EXPIRATION_SECONDS, le=TOKEN_MAX_EXPIRATION_SECONDS
    )
    """None: the kubelet's default (one hour)."""

    def to_object(self) -> dict[str, object]:
        entry: dict[str, object] = {"audience": self.audience}
        if self.expiration_seconds is not None:
            entry["expirationSeconds"] = self.expiration_seconds
        return entry


def check_token_audiences(requests: list[TokenRequest] | None) -> list[TokenRequest] | None:
    """Kubernetes refuses two token requests with the same audience."""
    seen: set[str] = set()
    for request in requests or []:
        if request.audience in seen:
            raise ValueError(f"audience {request.audience!r} is requested twice")
        seen.add(request.audience)
    return requests


def check_lifecycle_modes(modes: list[VolumeLifecycleMode]) -> list[VolumeLifecycleMode]:
    if not modes:
        raise ValueError("at least one mode is needed (Persistent, Ephemeral)")
    if len(set(modes)) != len(modes):
        raise ValueError("a mode is listed twice")
    return modes
