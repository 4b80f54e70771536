"""Pieces of a KubeSchedulerConfiguration that the harness merges into
kube-scheduler's own (``LocalClusterConfig.scheduler``, ``Cluster.restart_scheduler``)."""

from __future__ import annotations

from typing import Any

PACKING_SHAPE = ((0, 0), (100, 10))
"""(utilization, score): the more of a node's published capacity a pod's volumes
would use, the higher it scores, so the fullest node that still fits wins (the
default shape is the inverse: most free capacity wins)."""


def volume_binding_shape(points: tuple[tuple[int, int], ...], **args: Any) -> dict[str, Any]:
    """The default profile with VolumeBinding's scoring ``shape`` set to ``points``
    (StorageCapacityScoring) and any other VolumeBinding ``args``."""
    shape = [{"utilization": u, "score": s} for u, s in points]
    return {
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "pluginConfig": [{"name": "VolumeBinding", "args": {**args, "shape": shape}}],
            }
        ]
    }
