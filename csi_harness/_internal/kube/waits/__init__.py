"""Waiting for Kubernetes to do something, and failing with what it did instead.

Every wait lists the objects it is about and then follows them with a watch
(``csi_harness._internal.kube.watching.watch_until``), so it answers within one event of the
change instead of a poll interval later. Every function takes a timeout; a timeout
raises ``WaitTimeout`` naming what was expected and the last thing seen (the pod's
conditions, the events, the objects).
"""

from csi_harness._internal.core.waiting import WaitTimeout, wait_for
from csi_harness._internal.kube.describe import describe_claim
from csi_harness._internal.kube.waits.annotations import AnnotationHistory
from csi_harness._internal.kube.waits.attachments import (
    volume_attachments,
    wait_volume_attachment,
    wait_volume_attachments_gone,
)
from csi_harness._internal.kube.waits.claims import (
    SELECTED_NODE,
    claim_conditions,
    pv_topology,
    storage_of,
    wait_bound_volume,
    wait_claim,
    wait_claim_capacity,
    wait_volume_capacity,
)
from csi_harness._internal.kube.waits.csistoragecapacity import (
    DRIVER_NAME_LABEL,
    CapacityPublisher,
    capacities,
    wait_capacity,
)
from csi_harness._internal.kube.waits.events import SeenEvent, events, wait_event
from csi_harness._internal.kube.waits.pods import (
    termination_message,
    wait_pod_running,
    wait_pod_scheduled,
    wait_pod_succeeded,
    wait_pod_unschedulable,
    wait_pods_ready,
)
from csi_harness._internal.kube.watching import Kube

__all__ = [
    "DRIVER_NAME_LABEL",
    "SELECTED_NODE",
    "AnnotationHistory",
    "CapacityPublisher",
    "Kube",
    "SeenEvent",
    "WaitTimeout",
    "capacities",
    "claim_conditions",
    "describe_claim",
    "events",
    "pv_topology",
    "storage_of",
    "termination_message",
    "volume_attachments",
    "wait_bound_volume",
    "wait_capacity",
    "wait_claim",
    "wait_claim_capacity",
    "wait_event",
    "wait_for",
    "wait_pod_running",
    "wait_pod_scheduled",
    "wait_pod_succeeded",
    "wait_pod_unschedulable",
    "wait_pods_ready",
    "wait_volume_attachment",
    "wait_volume_attachments_gone",
    "wait_volume_capacity",
]
