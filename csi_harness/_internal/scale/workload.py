"""The burst a scale experiment creates: pods with one generic ephemeral volume each,
as KEP-1472's fake workload did, sized from a seeded distribution; or the same pods
as Deployments of one replica each, as clusterloader2 made them for the KEP author's
measurements (csi-driver-host-path docs/storage-capacity-tracking.md); or the same
pods without volumes, the baseline.

Pure: the objects are plain manifests, and the same ``Burst`` with the same seed gives
the same objects in the same order; ``create_paced`` is handed the call that creates
one.
"""

from __future__ import annotations

import enum
import random
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from csi_harness._internal.kube import objects
from csi_harness._internal.providers.local.config import NodeType
from csi_mock.model.quantity import QuantityError, format_quantity, parse_quantity

VOLUME = "scratch"
"""The name of every pod's ephemeral volume; its claim is ``<pod>-scratch``."""
APP_LABEL = "harness.csi-mock.example/scale"
DEPLOYMENT_LABEL = "harness.csi-mock.example/scale-deployment"


class WorkloadError(ValueError):
    """A workload parameter that cannot be used; the message names it."""


class WorkloadKind(enum.StrEnum):
    PODS = "pods"
    """Bare pods, created one after the other."""
    DEPLOYMENTS = "deployments"
    """A Deployment of one replica per pod (clusterloader2's shape): the ReplicaSet
    controller makes the pods, with names of its choosing."""


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
    """``pods`` pods, each with one ephemeral volume of a size from ``sizes`` (none
    when not ``volumes``), as bare pods or as Deployments of one replica."""

    pods: int
    sizes: SizeRange
    seed: int
    storage_class: str
    namespace: str
    volumes: bool = True
    kind: WorkloadKind = WorkloadKind.PODS
    node_type: str | None = NodeType.SIMULATED.value
    """The local provider's node type the pods must run on; None: any node (a cluster
    whose nodes are all alike, such as kind's workers)."""

    def __post_init__(self) -> None:
        if self.pods < 1:
            raise WorkloadError(f"--pods: {self.pods} is not a positive number")

    def volume_sizes(self) -> list[int]:
        """The size of each pod's volume, in pod order; the same for the same seed."""
        rng = random.Random(self.seed)
        return [self.sizes.draw(rng) for _ in range(self.pods)]

    def total_bytes(self) -> int:
        """What the burst's claims ask for: 0 for the baseline without volumes."""
        return sum(self.volume_sizes()) if self.volumes else 0

    @staticmethod
    def pod_name(index: int) -> str:
        return f"burst-{index:05d}"

    @classmethod
    def claim_name(cls, index: int) -> str:
        """The claim Kubernetes' ephemeral volume controller makes for pod ``index``."""
        return f"{cls.pod_name(index)}-{VOLUME}"

    def manifests(self) -> list[dict[str, Any]]:
        """The pods or Deployments, in creation order. On the local provider the pods
        may run only on simulated nodes (``node_type``): those are alike, and the real
        kubelet's node differs in allocatable and images, which kube-scheduler's
        scoring would weigh."""
        made = []
        for index, size in enumerate(self.volume_sizes()):
            ephemeral = [(VOLUME, str(size), self.storage_class)] if self.volumes else []
            pod = objects.pod(
                self.pod_name(index),
                self.namespace,
                ephemeral=ephemeral,
                node_type=self.node_type,
            )
            pod["metadata"]["labels"] = {APP_LABEL: "burst"}
            made.append(pod if self.kind is WorkloadKind.PODS else _deployment_of(pod))
        return made


def _deployment_of(pod: dict[str, Any]) -> dict[str, Any]:
    """A Deployment of one replica whose template is ``pod`` (its pod gets a name from
    the ReplicaSet controller, and its claim ``<that name>-scratch``). Each selects
    its own pod by a label of its name, as clusterloader2's Deployments do."""
    name = pod["metadata"]["name"]
    labels = {APP_LABEL: "burst", DEPLOYMENT_LABEL: name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": pod["metadata"]["namespace"], "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {DEPLOYMENT_LABEL: name}},
            "template": {"metadata": {"labels": labels}, "spec": pod["spec"]},
        },
    }


BUSY_NAMESPACE = "scale-busy"
"""Where the other pods of busy nodes live, apart from the burst the run follows."""
BUSY_SHARE = 0.5
"""What a busy node's other pod asks for, of the node's CPU and memory."""


def busy_pods(nodes: Sequence[str], capacity: dict[str, str]) -> list[dict[str, Any]]:
    """One pod per node in ``nodes``, bound to it (``spec.nodeName``), asking for
    ``BUSY_SHARE`` of the CPU and memory in ``capacity``: nodes that carry other work,
    as real ones do, so that they are no longer alike to kube-scheduler's scoring. The
    pods have no volumes; kube-scheduler counts their requests whether or not anything
    starts them."""
    cpu_millis = int(parse_quantity(capacity["cpu"]) * 1000 * BUSY_SHARE)
    memory = int(parse_quantity(capacity["memory"]) * BUSY_SHARE)
    made = []
    for node in nodes:
        pod = objects.pod(f"busy-{node}", BUSY_NAMESPACE)
        pod["metadata"]["labels"] = {APP_LABEL: "busy"}
        pod["spec"]["nodeName"] = node
        for container in pod["spec"]["containers"]:
            container["resources"] = {
                "requests": {"cpu": f"{cpu_millis}m", "memory": format_quantity(memory)}
            }
        made.append(pod)
    return made


def creation_offsets(count: int, qps: float | None) -> list[float]:
    """When to create each of ``count`` objects, in seconds after the first: evenly
    ``1/qps`` apart (clusterloader2's steady rate, 10/s in the KEP author's runs), or
    all at 0 (as fast as the API server takes them) when ``qps`` is None."""
    if qps is not None and qps <= 0:
        raise WorkloadError(f"--create-qps: {qps} is not a positive rate")
    return [0.0 if qps is None else i / qps for i in range(count)]


def fill_ratio(burst: Burst, pool_bytes: int, nodes: int) -> float:
    """The share of all node pools the burst asks for."""
    return burst.total_bytes() / (pool_bytes * nodes)


CREATORS = 8
"""Creations in flight at once at a paced rate, so that one slow answer of the API
server does not hold back the ones due after it (clusterloader2 creates in parallel
too)."""


def create_paced(
    create: Callable[[dict[str, Any]], object],
    manifests: Sequence[dict[str, Any]],
    offsets: Sequence[float],
    start: float,
) -> None:
    """Create each manifest at ``start`` + its offset (``time.monotonic()``), or as soon
    after as a creator is free; returns when all are created, raises the first
    failure. All offsets 0 (no rate): one after the other, as fast as the API server
    answers."""
    if all(offset == 0 for offset in offsets):
        for manifest in manifests:
            create(manifest)
        return
    failed: list[Future[object]] = []
    with ThreadPoolExecutor(max_workers=CREATORS, thread_name_prefix="create") as pool:
        futures = []
        for manifest, offset in zip(manifests, offsets, strict=True):
            if failed:
                break
            if (wait := start + offset - time.monotonic()) > 0:
                time.sleep(wait)
            future = pool.submit(create, manifest)
            future.add_done_callback(lambda f: failed.append(f) if f.exception() else None)
            futures.append(future)
        for future in futures:
            future.result()
