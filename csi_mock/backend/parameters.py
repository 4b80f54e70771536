"""CreateVolume/GetCapacity parameters: which kind a request is for."""

from __future__ import annotations

from collections.abc import Mapping

from csi_mock.model.errors import InvalidArgument
from csi_mock.model.kind import KIND_PARAMETER, VolumeKind

# Keys Kubernetes sidecars add themselves (PVC/PV names with --extra-create-metadata).
_CO_PREFIX = "csi.storage.k8s.io/"


def resolve_kind(
    parameters: Mapping[str, str], kinds: Mapping[str, VolumeKind], default: str
) -> VolumeKind:
    """The kind selected by `parameters`; unknown keys and kinds are refused by name."""
    unknown = sorted(k for k in parameters if k != KIND_PARAMETER and not k.startswith(_CO_PREFIX))
    if unknown:
        raise InvalidArgument(
            f"parameters: unknown key {', '.join(map(repr, unknown))}"
            f" (supported: {KIND_PARAMETER!r})"
        )
    name = parameters.get(KIND_PARAMETER) or default
    kind = kinds.get(name)
    if kind is None:
        raise InvalidArgument(
            f"parameters: {KIND_PARAMETER}={name!r} is not a configured kind"
            f" (known: {', '.join(sorted(kinds))})"
        )
    return kind


def significant(parameters: Mapping[str, str]) -> dict[str, str]:
    """Parameters that decide compatibility of a repeated CreateVolume."""
    return {k: v for k, v in parameters.items() if not k.startswith(_CO_PREFIX)}
