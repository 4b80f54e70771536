"""What a scale run reads from its pods at its end: for the pods it left waiting, why
kube-scheduler says they wait, and which node each is nominated for. One list of the
namespace's pods serves both."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from lightkube import Client
from lightkube.resources.core_v1 import Pod

from csi_harness._internal.scale.workload import VOLUME

if TYPE_CHECKING:
    from csi_harness._internal.scale.run_result import RunResult


def read_unplaced_pods(
    kube: Client, namespace: str, bound_claims: set[str], result: RunResult
) -> None:
    """Fill ``result.unbound_reasons`` and ``result.unplaced_nominated``."""
    pods = list(kube.list(Pod, namespace=namespace))
    result.unbound_reasons = unbound_reasons(pods, bound_claims)
    result.unplaced_nominated = unplaced_nominated(pods)


def unplaced_nominated(pods: list[Pod]) -> dict[str, int]:
    """For the pods not placed on a node: how many name each node as their
    ``status.nominatedNodeName`` ("" for none)."""
    nominated: dict[str, int] = {}
    for pod in pods:
        if pod.spec is not None and pod.spec.nodeName:
            continue
        node = (pod.status.nominatedNodeName if pod.status else None) or ""
        nominated[node] = nominated.get(node, 0) + 1
    return nominated


def unbound_reasons(pods: list[Pod], bound_claims: set[str]) -> dict[str, int]:
    """Why each pod not placed on a node, and whose claim is not bound, is waiting
    (a pod's claim is ``<pod>-scratch``, whatever named the pod)."""
    reasons: dict[str, int] = {}
    for pod in pods:
        name = (pod.metadata.name if pod.metadata else None) or ""
        if f"{name}-{VOLUME}" in bound_claims or (pod.spec is not None and pod.spec.nodeName):
            continue
        conditions = (pod.status.conditions if pod.status else None) or []
        scheduled = next((c for c in conditions if c.type == "PodScheduled"), None)
        if scheduled is None:
            reason = "no PodScheduled condition yet"
        elif scheduled.status == "True":
            reason = "scheduled"
        else:
            message = (scheduled.message or scheduled.reason or "").split(" preemption:")[0]
            reason = re.sub(r'PVC "[^"]*"', 'PVC "<its claim>"', message)
        reasons[reason] = reasons.get(reason, 0) + 1
    return reasons
