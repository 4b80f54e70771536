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


CAPACITY_WEIGHT = 20
"""VolumeBinding's weight in a profile that weighs capacity against a preference: its
score (0-100) counts 20 times, so 6 points of it outweigh the 100 that NodeAffinity
gives a pod's preferred node."""


def capacity_scoring_profile(
    scheduler_name: str,
    points: tuple[tuple[int, int], ...] | None = None,
    *,
    against_preference: bool = False,
    scoring: bool = True,
) -> dict[str, Any]:
    """A scheduler profile named ``scheduler_name`` for a scheduler of a test's own:
    VolumeBinding scores with ``points`` (None: kube-scheduler's default shape).

    ``against_preference``: VolumeBinding (weight ``CAPACITY_WEIGHT``) and NodeAffinity
    (weight 1) are the only score plugins, so other pods on a node (which
    NodeResourcesFit and the like weigh) do not move its score, and a node the pod
    prefers (``preferredDuringSchedulingIgnoredDuringExecution``) gets 100 points that
    only a capacity score at least 6 points higher outweighs. A test whose pod prefers
    the node that capacity must beat then fails for certain with ``scoring`` False
    (VolumeBinding's score off, the preference alone decides), not by a tie-break's
    chance."""
    profile: dict[str, Any] = {"schedulerName": scheduler_name}
    if points is not None:
        profile["pluginConfig"] = [{"name": "VolumeBinding", "args": {"shape": _shape(points)}}]
    score: dict[str, Any] = {}
    if against_preference:
        score["disabled"] = [{"name": "*"}]
        score["enabled"] = [{"name": "NodeAffinity", "weight": 1}]
        if scoring:
            score["enabled"].insert(0, {"name": "VolumeBinding", "weight": CAPACITY_WEIGHT})
    elif not scoring:
        score["disabled"] = [{"name": "VolumeBinding"}]
    if score:
        profile["plugins"] = {"score": score}
    return profile


def _shape(points: tuple[tuple[int, int], ...]) -> list[dict[str, int]]:
    """VolumeBinding's ``shape`` argument from (utilization, score) points."""
    return [{"utilization": u, "score": s} for u, s in points]
