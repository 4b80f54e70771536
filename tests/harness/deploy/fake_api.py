"""A stand-in for the Kubernetes API that InClusterDriver talks to, with just enough of
the controllers and kubelets behind it: applied workloads get pods (by their node
affinity), a node plugin pod registers its driver in CSINode and deregisters when it
goes, a provisioner publishes capacity for every node x WaitForFirstConsumer class."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from lightkube.codecs import from_dict
from lightkube.resources.core_v1 import Pod
from lightkube.resources.storage_v1 import CSIStorageCapacity
from lightkube.types import PatchType

from harness.kube.resources import CSINodeResource

PodStatus = Callable[[str, str], dict[str, Any]]
"""(role, node) -> the status of a new pod."""


def ready_status(role: str, node: str) -> dict[str, Any]:
    return {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


@dataclass
class Event:
    verb: str
    kind: str
    name: str
    body: Any = None


@dataclass
class FakeApi:
    nodes: list[str]
    pod_status: PodStatus = ready_status
    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """(kind, name) -> the object as applied (namespaces are not told apart)."""
    pods: list[dict[str, Any]] = field(default_factory=list)
    registered: dict[str, set[str]] = field(default_factory=dict)
    """node -> drivers in its CSINode."""
    capacities: list[dict[str, Any]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    logs: dict[tuple[str, str], str] = field(default_factory=dict)
    deregistration_polls: int = 2
    """Like a kubelet, drop a stopped driver's CSINode entry only a little later: after
    this many more reads of CSINode."""
    _leaving: dict[tuple[str, str], int] = field(default_factory=dict)
    _ids: Iterator[int] = field(default_factory=itertools.count)

    # -- the client's methods ----------------------------------------------------------

    def list(self, resource: Any, *, namespace: str | None = None, labels: Any = None) -> list[Any]:
        if resource is Pod:
            items = [Pod.from_dict(p) for p in self.pods]
        elif resource is CSINodeResource:
            self._kubelets_catch_up()
            return [
                SimpleNamespace(
                    metadata=SimpleNamespace(name=node),
                    spec={"drivers": [{"name": d} for d in sorted(drivers)] or None},
                )
                for node, drivers in self.registered.items()
            ]
        elif resource is CSIStorageCapacity:
            items = [CSIStorageCapacity.from_dict(c) for c in self.capacities]
        else:
            items = [
                from_dict(obj)
                for (kind, _), obj in self.objects.items()
                if kind == resource.__name__
            ]
        return [i for i in items if _matches(i.metadata.labels or {}, labels or {})]

    def apply(self, obj: Any, field_manager: str | None = None, force: bool = False) -> None:
        data = obj.to_dict()
        kind, name = data["kind"], data["metadata"]["name"]
        self.events.append(Event("apply", kind, name))
        self.objects[(kind, name)] = data
        if kind in ("Deployment", "DaemonSet"):
            self._start_pods(data)

    def delete(self, resource: Any, name: str, *, namespace: str | None = None, **_: Any) -> None:
        kind = resource.__name__
        self.events.append(Event("delete", kind, name))
        if kind == "CSIStorageCapacity":
            self.capacities = [c for c in self.capacities if c["metadata"]["name"] != name]
            return
        obj = self.objects.pop((kind, name))
        if kind in ("Deployment", "DaemonSet"):
            self._stop_pods(lambda pod: _owned_by(pod, obj))

    def patch(
        self,
        resource: Any,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.STRATEGIC,
    ) -> None:
        kind = resource.__name__
        self.events.append(Event("patch", kind, name, (body, patch_type)))
        obj = self.objects[(kind, name)]
        if body == {"spec": {"replicas": 0}}:
            obj["spec"]["replicas"] = 0
            self._stop_pods(lambda pod: _owned_by(pod, obj))
            return
        assert patch_type is PatchType.MERGE
        obj["spec"]["template"]["spec"]["affinity"] = body["spec"]["template"]["spec"]["affinity"]
        allowed = _allowed_nodes(obj, self.nodes)
        self._stop_pods(lambda pod: _owned_by(pod, obj) and pod["spec"]["nodeName"] not in allowed)

    def log(
        self, name: str, *, namespace: str | None = None, container: str | None = None
    ) -> Iterator[str]:
        text = self.logs.get((name, container or ""), f"log of {name}/{container}\n")
        return iter(text.splitlines(keepends=True))

    # -- what the cluster does ---------------------------------------------------------

    def pod_names(self, role: str) -> list[str]:
        return [
            p["metadata"]["name"]
            for p in self.pods
            if p["metadata"]["labels"]["app.kubernetes.io/component"] == role
        ]

    def _start_pods(self, workload: dict[str, Any]) -> None:
        template = workload["spec"]["template"]
        role = template["metadata"]["labels"]["app.kubernetes.io/component"]
        nodes = sorted(_allowed_nodes(workload, self.nodes))
        if workload["kind"] == "Deployment":
            nodes = nodes[:1]
        for node in nodes:
            self.pods.append(
                {
                    "metadata": {
                        "name": f"{workload['metadata']['name']}-{next(self._ids)}",
                        "labels": dict(template["metadata"]["labels"]),
                    },
                    "spec": {"nodeName": node, "containers": template["spec"]["containers"]},
                    "status": self.pod_status(role, node),
                }
            )
            driver = template["metadata"]["labels"]["app.kubernetes.io/instance"]
            if role == "node":
                self.registered.setdefault(node, set()).add(driver)
            if role == "provisioner":
                self._publish_capacity(
                    driver, [node] if workload["kind"] == "DaemonSet" else self.nodes
                )

    def _publish_capacity(self, driver: str, nodes: list[str]) -> None:
        for (kind, name), sc in list(self.objects.items()):
            if kind != "StorageClass" or sc.get("volumeBindingMode") != "WaitForFirstConsumer":
                continue
            for node in nodes:
                self.capacities.append(
                    {
                        "metadata": {
                            "name": f"csisc-{next(self._ids)}",
                            "namespace": "csi-mock",
                            # external-provisioner's label: capacities() selects by it.
                            "labels": {"csi.storage.k8s.io/drivername": driver},
                        },
                        "storageClassName": name,
                        "nodeTopology": {"matchLabels": {f"topology.{driver}/node": node}},
                        "capacity": "10Gi",
                    }
                )

    def _stop_pods(self, which: Callable[[dict[str, Any]], bool]) -> None:
        for pod in [p for p in self.pods if which(p)]:
            self.pods.remove(pod)
            labels = pod["metadata"]["labels"]
            if labels["app.kubernetes.io/component"] == "node":
                driver = labels.get("app.kubernetes.io/instance", "csi-mock.example")
                self._leaving[(pod["spec"]["nodeName"], driver)] = self.deregistration_polls

    def _kubelets_catch_up(self) -> None:
        for (node, driver), polls in list(self._leaving.items()):
            if polls > 0:
                self._leaving[(node, driver)] = polls - 1
                continue
            del self._leaving[(node, driver)]
            self.registered.get(node, set()).discard(driver)
            self.events.append(Event("deregistered", "CSINode", node, driver))


def _matches(labels: dict[str, str], selector: dict[str, Any]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _owned_by(pod: dict[str, Any], workload: dict[str, Any]) -> bool:
    return _matches(pod["metadata"]["labels"], workload["spec"]["selector"]["matchLabels"])


def _allowed_nodes(workload: dict[str, Any], nodes: list[str]) -> set[str]:
    affinity = workload["spec"]["template"]["spec"].get("affinity")
    if affinity is None:
        return set(nodes)
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]

    def admits(term: dict[str, Any], node: str) -> bool:
        return all((node in r["values"]) == (r["operator"] == "In") for r in term["matchFields"])

    return {n for n in nodes if any(admits(t, n) for t in terms)}
