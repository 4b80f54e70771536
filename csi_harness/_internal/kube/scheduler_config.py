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
    return {
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "pluginConfig": [
                    {"name": "VolumeBinding", "args": {**args, "shape": _shape(points)}}
                ],
            }
        ]
    }


def capacity_scoring_profile(
    scheduler_name: str,
    points: tuple[tuple[int, int], ...] | None = None,
    *,
    sole_scorer: bool = False,
    scoring: bool = True,
) -> dict[str, Any]:
    """A scheduler profile named ``scheduler_name`` for a scheduler of a test's own:
    VolumeBinding scores with ``points`` (None: kube-scheduler's default shape).
    ``sole_scorer``: every other score plugin is off, so other pods on a node (which
    NodeResourcesFit and the like weigh) do not move its score. ``scoring`` False
    turns VolumeBinding's score off too, for showing that a test depends on it."""
    profile: dict[str, Any] = {"schedulerName": scheduler_name}
    if points is not None:
        profile["pluginConfig"] = [{"name": "VolumeBinding", "args": {"shape": _shape(points)}}]
    score: dict[str, Any] = {}
    if sole_scorer:
        score["disabled"] = [{"name": "*"}]
        if scoring:
            score["enabled"] = [{"name": "VolumeBinding", "weight": 1}]
    elif not scoring:
        score["disabled"] = [{"name": "VolumeBinding"}]
    if score:
        profile["plugins"] = {"score": score}
    return profile


def _shape(points: tuple[tuple[int, int], ...]) -> list[dict[str, int]]:
    """VolumeBinding's ``shape`` argument from (utilization, score) points."""
    return [{"utilization": u, "score": s} for u, s in points]
