"""CSINode read as plain data, where lightkube's typed model is too strict.

The kubelet writes CSINode objects with ``spec.drivers: null`` while no driver is
registered; lightkube-models rejects that, so CSINode is read generically.
"""

from __future__ import annotations

from typing import Any

from lightkube.generic_resource import create_global_resource

CSINodeResource = create_global_resource("storage.k8s.io", "v1", "CSINode", "csinodes")


def csinode_drivers(obj: Any) -> list[dict[str, Any]]:
    """The driver entries of a generic CSINode (empty when none is registered)."""
    spec = obj.spec or {}
    return list(spec.get("drivers") or [])
