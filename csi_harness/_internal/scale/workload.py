"""The burst a scale experiment creates: pods with one generic ephemeral volume each,
as KEP-1472's fake workload did, sized from a seeded distribution.

Pure: the pods are plain manifests, and the same ``Burst`` with the same seed gives
the same pods in the same order.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from csi_harness._internal.kube import objects
from csi_harness._internal.providers.local.config import NodeType
from csi_mock.model.quantity import QuantityError, format_quantity, parse_quantity

VOLUME = "scratch"
"""The name of every pod's ephemeral volume; its claim is ``<pod>-scratch``."""
APP_LABEL = "harness.csi-mock.example/scale"


class WorkloadError(ValueError):
    """A workload parameter that cannot be used; the message names it."""


@dataclass(frozen=True)
class SizeRange:
    """Volume sizes: one size, or sizes drawn uniformly from ``low`` to ``high`` in
    steps of ``step`` bytes (written ``1Gi-3Gi`` or ``512Mi-2Gi/256Mi``)."""

    low: int
    high: int
    step: int

    @classmethod
    def parse(cls, text: str, *, option: str = "--size") -> SizeRange:
        match = re.fullmatch(r"\s*([^-/\s]+)\s*(?:-\s*([^/\s]+)\s*)?(?:/\s*(\S+)\s*)?", text)
        if match is None:
            raise WorkloadError(f"{option}: {text!r} is not SIZE or LOW-HIGH[/STEP]")
        try:
            low = parse_quantity(match.group(1))
            high = parse_quantity(match.group(2)) if match.group(2) else low
            step = parse_quantity(match.group(3)) if match.group(3) else None
        except QuantityError as exc:
            raise WorkloadError(f"{option}: {exc}") from exc
        if low <= 0:
            raise WorkloadError(f"{option}: {text!r}: sizes must be positive")
        if high < low:
            raise WorkloadError(f"{option}: {text!r}: the upper bound is below the lower one")
        if step is None:
            # Default step: the lower bound, or the whole range when it does not divide it.
            step = low if (high - low) % low == 0 else max(high - low, 1)
        if step <= 0 or (high - low) % step:
            raise WorkloadError(f"{option}: {text!r}: the step must divide HIGH-LOW")
        return cls(low, high, step)

    @property
    def fixed(self) -> bool:
        return self.low == self.high

    @property
    def mean(self) -> float:
        return (self.low + self.high) / 2

    def draw(self, rng: random.Random) -> int:
        if self.fixed:
            return self.low
        return self.low + self.step * rng.randint(0, (self.high - self.low) // self.step)

    def __str__(self) -> str:
        if self.fixed:
            return format_quantity(self.low)
        return (
            f"{format_quantity(self.low)}-{format_quantity(self.high)}/{format_quantity(self.step)}"
        )


@dataclass(frozen=True)
class Burst:
    """``pods`` pods, each with one ephemeral volume of a size from ``sizes``, created
    as fast as the API server takes them."""

    pods: int
    sizes: SizeRange
    seed: int
    storage_class: str
    namespace: str

    def __post_init__(self) -> None:
        if self.pods < 1:
            raise WorkloadError(f"--pods: {self.pods} is not a positive number")

    def volume_sizes(self) -> list[int]:
        """The size of each pod's volume, in pod order; the same for the same seed."""
        rng = random.Random(self.seed)
        return [self.sizes.draw(rng) for _ in range(self.pods)]

    def total_bytes(self) -> int:
        return sum(self.volume_sizes())

    @staticmethod
    def pod_name(index: int) -> str:
        return f"burst-{index:05d}"

    @classmethod
    def claim_name(cls, index: int) -> str:
        """The claim Kubernetes' ephemeral volume controller makes for pod ``index``."""
        return f"{cls.pod_name(index)}-{VOLUME}"

    def manifests(self) -> list[dict[str, Any]]:
        """The pods, in creation order. They may run only on simulated nodes: those
        are alike, and the real kubelet's node differs in allocatable and images,
        which kube-scheduler's scoring would weigh."""
        pods = []
        for index, size in enumerate(self.volume_sizes()):
            pod = objects.pod(
                self.pod_name(index),
                self.namespace,
                ephemeral=[(VOLUME, str(size), self.storage_class)],
                node_type=NodeType.SIMULATED.value,
            )
            pod["metadata"]["labels"] = {APP_LABEL: "burst"}
            pods.append(pod)
        return pods


def fill_ratio(burst: Burst, pool_bytes: int, nodes: int) -> float:
    """The share of all node pools the burst asks for."""
    return burst.total_bytes() / (pool_bytes * nodes)
