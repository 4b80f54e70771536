"""A stand-in for the Kubernetes API that InClusterDriver talks to, with just enough of
the controllers and kubelets behind it: applied workloads get pods (by their node
affinity), a node plugin pod registers its driver in CSINode and deregisters when it
goes, a pod with a provisioner publishes capacity in its namespace for every node x
WaitForFirstConsumer class of its driver, a deleted namespace takes everything in it
and lingers as terminating for a few reads."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml
from lightkube.codecs import from_dict
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import Status
from lightkube.resources.core_v1 import Pod
from lightkube.resources.storage_v1 import CSIStorageCapacity
from lightkube.types import PatchType

from csi_harness._internal.kube.csinode import CSINodeResource

PodStatus = Callable[[str, str], dict[str, Any]]
"""(role, node) -> the status of a new pod."""


def write_kubeconfig(path: Path) -> Path:
    """A kubeconfig of an API server at https://10.1.2.3:6443 with token k8s-token."""
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": "https://10.1.2.3:6443",
                            "insecure-skip-tls-verify": True,
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"token": "k8s-token"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


def ready_status(role: str, node: str) -> dict[str, Any]:
    return {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


@dataclass
class Event:
    verb: str
    kind: str
    name: str
    body: Any = None
    namespace: str | None = None


@dataclass
class FakeApi:
    nodes: list[str]
    pod_status: PodStatus = ready_status
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    """(kind, namespace, name) -> the object as applied; namespace "" at cluster scope."""
    pods: list[dict[str, Any]] = field(default_factory=list)
    registered: dict[str, set[str]] = field(default_factory=dict)
    """node -> drivers in its CSINode."""
    capacities: list[dict[str, Any]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    logs: dict[tuple[str, str], str] = field(default_factory=dict)
    live_status: bool = False
    """Ask ``pod_status`` again at every read of the pods, as a kubelet updates them
    (else once, when the pod is made)."""
    deregistration_polls: int = 2
    """Like a kubelet, drop a stopped driver's CSINode entry only a little later: after
    this many more reads of CSINode."""
    termination_polls: int = 2
    """Like the namespace controller, keep a deleted namespace (terminating, taking no
    new objects) for this many more reads of it."""
    _leaving: dict[tuple[str, str], int] = field(default_factory=dict)
    _terminating: dict[str, int] = field(default_factory=dict)
    _ids: Iterator[int] = field(default_factory=itertools.count)

    # -- the client's methods ----------------------------------------------------------

    def list(
        self,
        resource: Any,
        *,
        namespace: str | None = None,
        labels: Any = None,
        fields: dict[str, str] | None = None,
    ) -> list[Any]:
        if resource is Pod:
            items = [Pod.from_dict(self._read_pod(p)) for p in self._in(self.pods, namespace)]
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
            items = [CSIStorageCapacity.from_dict(c) for c in self._in(self.capacities, namespace)]
        else:
            if resource.__name__ == "Namespace":
                self._namespaces_catch_up()
            items = [
                from_dict(obj)
                for (kind, _, _), obj in self.objects.items()
                if kind == resource.__name__
                and (namespace is None or obj["metadata"].get("namespace") == namespace)
                and all(obj.get(key) == value for key, value in (fields or {}).items())
            ]
        return [i for i in items if _matches(i.metadata.labels or {}, labels or {})]

    def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Any:
        kind = resource.__name__
        if kind == "Namespace":
            self._namespaces_catch_up()
        obj = self.objects.get((kind, namespace or "", name))
        if obj is None:
            raise not_found(kind, name)
        return from_dict(obj)

    def apply(self, obj: Any, field_manager: str | None = None, force: bool = False) -> None:
        data = obj.to_dict()
        kind, name = data["kind"], data["metadata"]["name"]
        namespace = data["metadata"].get("namespace")
        self.events.append(Event("apply", kind, name, namespace=namespace))
        if namespace is not None:
            if ("Namespace", "", namespace) not in self.objects:
                raise not_found("Namespace", namespace)
            if namespace in self._terminating:
                raise api_error(403, f"namespace {namespace} is being terminated")
        self.objects[(kind, namespace or "", name)] = data
        if kind in ("Deployment", "DaemonSet"):
            self._start_pods(data)

    def delete(self, resource: Any, name: str, *, namespace: str | None = None, **_: Any) -> None:
        kind = resource.__name__
        self.events.append(Event("delete", kind, name, namespace=namespace))
        if kind == "CSIStorageCapacity":
            self.capacities = [
                c
                for c in self.capacities
                if (c["metadata"]["name"], c["metadata"]["namespace"]) != (name, namespace)
            ]
            return
        if kind == "Namespace" and name in self._terminating:
            return
        obj = self.objects.pop((kind, namespace or "", name), None)
        if obj is None:
            raise not_found(kind, name)
        if kind in ("Deployment", "DaemonSet"):
            self._stop_pods(lambda pod: _owned_by(pod, obj))
        if kind == "Namespace":
            self._terminate(obj)

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
        self.events.append(Event("patch", kind, name, (body, patch_type), namespace))
        if kind == "Node":
            # Label clean-up after a driver (drop_topology_labels): the event is all.
            assert patch_type is PatchType.MERGE and set(body) == {"metadata"}
            return
        obj = self.objects[(kind, namespace or "", name)]
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

    def pod_names(self, role: str, namespace: str | None = None) -> list[str]:
        return [
            p["metadata"]["name"]
            for p in self._in(self.pods, namespace)
            if p["metadata"]["labels"]["app.kubernetes.io/component"] == role
        ]

    def namespaced(self, namespace: str) -> list[str]:
        """Everything left in ``namespace``: objects, pods, capacities."""
        return [f"{kind}/{name}" for (kind, ns, name) in self.objects if ns == namespace] + [
            f"{kind}/{item['metadata']['name']}"
            for kind, items in (("Pod", self.pods), ("CSIStorageCapacity", self.capacities))
            for item in self._in(items, namespace)
        ]

    def _read_pod(self, pod: dict[str, Any]) -> dict[str, Any]:
        if not self.live_status:
            return pod
        role = pod["metadata"]["labels"]["app.kubernetes.io/component"]
        return {**pod, "status": self.pod_status(role, pod["spec"]["nodeName"])}

    @staticmethod
    def _in(items: list[dict[str, Any]], namespace: str | None) -> list[dict[str, Any]]:
        return [i for i in items if namespace is None or i["metadata"]["namespace"] == namespace]

    def _start_pods(self, workload: dict[str, Any]) -> None:
        template = workload["spec"]["template"]
        role = template["metadata"]["labels"]["app.kubernetes.io/component"]
        namespace = workload["metadata"]["namespace"]
        nodes = sorted(_allowed_nodes(workload, self.nodes))
        if workload["kind"] == "Deployment":
            nodes = nodes[:1]
        for node in nodes:
            self.pods.append(
                {
                    "metadata": {
                        "name": f"{workload['metadata']['name']}-{next(self._ids)}",
                        "namespace": namespace,
                        "labels": dict(template["metadata"]["labels"]),
                    },
                    "spec": {"nodeName": node, "containers": template["spec"]["containers"]},
                    "status": self.pod_status(role, node),
                }
            )
            driver = template["metadata"]["labels"]["app.kubernetes.io/instance"]
            if role == "node":
                self.registered.setdefault(node, set()).add(driver)
            if any(c["name"] == "csi-provisioner" for c in template["spec"]["containers"]):
                self._publish_capacity(
                    driver, namespace, [node] if workload["kind"] == "DaemonSet" else self.nodes
                )

    def _publish_capacity(self, driver: str, namespace: str, nodes: list[str]) -> None:
        for (kind, _, name), sc in list(self.objects.items()):
            if (
                kind != "StorageClass"
                or sc["provisioner"] != driver
                or sc.get("volumeBindingMode") != "WaitForFirstConsumer"
            ):
                continue
            for node in nodes:
                self.capacities.append(
                    {
                        "metadata": {
                            "name": f"csisc-{next(self._ids)}",
                            "namespace": namespace,
                            # external-provisioner's label: capacities() selects by it.
                            "labels": {"csi.storage.k8s.io/drivername": driver},
                        },
                        "storageClassName": name,
                        "nodeTopology": {"matchLabels": {f"topology.{driver}/node": node}},
                        "capacity": "10Gi",
                    }
                )

    def _terminate(self, namespace: dict[str, Any]) -> None:
        """Delete what the namespace holds; the namespace itself goes a little later."""
        name = namespace["metadata"]["name"]
        for key in [k for k in self.objects if k[1] == name]:
            obj = self.objects.pop(key)
            if obj["kind"] in ("Deployment", "DaemonSet"):
                self._stop_pods(lambda pod, obj=obj: _owned_by(pod, obj))
        self.capacities = [c for c in self.capacities if c["metadata"]["namespace"] != name]
        namespace["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        namespace["status"] = {"phase": "Terminating"}
        self.objects[("Namespace", "", name)] = namespace
        self._terminating[name] = self.termination_polls

    def _namespaces_catch_up(self) -> None:
        for name, polls in list(self._terminating.items()):
            if polls > 0:
                self._terminating[name] = polls - 1
                continue
            del self._terminating[name]
            del self.objects[("Namespace", "", name)]
            self.events.append(Event("terminated", "Namespace", name))

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


def api_error(code: int, message: str) -> ApiError:
    return ApiError(status=Status(code=code, message=message))


def not_found(kind: str, name: str) -> ApiError:
    return api_error(404, f"{kind} {name} not found")


def _matches(labels: dict[str, str], selector: dict[str, Any]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _owned_by(pod: dict[str, Any], workload: dict[str, Any]) -> bool:
    return pod["metadata"]["namespace"] == workload["metadata"]["namespace"] and _matches(
        pod["metadata"]["labels"], workload["spec"]["selector"]["matchLabels"]
    )


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
