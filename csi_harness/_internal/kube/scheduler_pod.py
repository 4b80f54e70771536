"""A kube-scheduler of a test's own, run as a pod in the cluster beside the cluster's
scheduler (Kubernetes' "multiple schedulers"): it serves only the profiles it is
given, so pods name one of them in ``spec.schedulerName`` and the cluster's own
scheduler never sees them; nothing of the cluster's is restarted.

The pod runs the image of the cluster's own kube-scheduler pod (a kubeadm or kind
control plane: already on that node, so nothing is pulled), on that node, as a
service account bound to the roles the cluster's scheduler has
(``system:kube-scheduler``, ``system:volume-scheduler``). Without leader election,
with in-cluster credentials. It is ready when its ``/readyz`` answers, which
includes its informers' sync.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import yaml
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Namespace, Pod
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding

from csi_harness._internal.core.unsupported import Unsupported
from csi_harness._internal.kube import objects
from csi_harness._internal.kube.describe import container_statuses
from csi_harness._internal.kube.pod_status import (
    last_termination,
    pod_ready,
    runtime_start_failure,
)
from csi_harness._internal.kube.start_failures import StartHistory
from csi_harness._internal.kube.waits import wait_for

SCHEDULER_ROLES = ("system:kube-scheduler", "system:volume-scheduler")
CONFIG_PATH = "/etc/kube-scheduler/config.yaml"
SECURE_PORT = 10259


def scheduler_configuration(profiles: Sequence[Mapping[str, object]]) -> dict[str, Any]:
    """A KubeSchedulerConfiguration with only ``profiles``, no leader election, the
    pod's own credentials, and the back-off the harness gives its schedulers."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": 2,
        "profiles": [dict(p) for p in profiles],
    }


def cluster_scheduler_pod(kube: Client) -> tuple[str, str]:
    """(image, node) of the cluster's own kube-scheduler pod, or Unsupported."""
    try:
        pods = list(kube.list(Pod, namespace="kube-system", labels={"component": "kube-scheduler"}))
    except ApiError as exc:
        raise Unsupported(f"cannot list the cluster's kube-scheduler pods: {exc}") from exc
    for pod in pods:
        if pod.spec is not None and pod.spec.nodeName and pod.spec.containers:
            image = pod.spec.containers[0].image
            if image:
                return image, pod.spec.nodeName
    raise Unsupported(
        "the cluster runs no kube-scheduler pod (component=kube-scheduler in kube-system) "
        "whose image a scheduler of the test's own could run"
    )


def manifests(
    name: str,
    profiles: Sequence[Mapping[str, object]],
    *,
    image: str,
    node: str,
    feature_gates: Mapping[str, bool],
) -> list[dict[str, Any]]:
    """The namespace ``name``, its service account, ConfigMap and pod, and a
    ClusterRoleBinding per role in ``SCHEDULER_ROLES`` (named ``<name>-<role>``)."""
    subject = {"kind": "ServiceAccount", "name": "kube-scheduler", "namespace": name}
    gates = ",".join(f"{gate}={str(on).lower()}" for gate, on in sorted(feature_gates.items()))
    probe = {"httpGet": {"path": "/readyz", "port": SECURE_PORT, "scheme": "HTTPS"}}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "kube-scheduler", "namespace": name},
        },
        *(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": binding_name(name, role)},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": role,
                },
                "subjects": [subject],
            }
            for role in SCHEDULER_ROLES
        ),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "config", "namespace": name},
            "data": {"config.yaml": yaml.safe_dump(scheduler_configuration(profiles))},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "kube-scheduler", "namespace": name},
            "spec": {
                "serviceAccountName": "kube-scheduler",
                "nodeName": node,
                "tolerations": [{"operator": "Exists"}],
                "containers": [
                    {
                        "name": "kube-scheduler",
                        "image": image,
                        "imagePullPolicy": "IfNotPresent",
                        "command": [
                            "kube-scheduler",
                            f"--config={CONFIG_PATH}",
                            f"--secure-port={SECURE_PORT}",
                            "--profiling=false",
                            *([f"--feature-gates={gates}"] if gates else []),
                        ],
                        "readinessProbe": {**probe, "periodSeconds": 1},
                        "volumeMounts": [{"name": "config", "mountPath": "/etc/kube-scheduler"}],
                    }
                ],
                "volumes": [{"name": "config", "configMap": {"name": "config"}}],
            },
        },
    ]


def binding_name(name: str, role: str) -> str:
    return f"{name}-{role.replace(':', '-')}"


@contextlib.contextmanager
def scheduler_pod(
    kube: Client,
    name: str,
    profiles: Sequence[Mapping[str, object]],
    *,
    feature_gates: Mapping[str, bool] | None = None,
    timeout: float = 120,
) -> Iterator[None]:
    """Run a kube-scheduler serving ``profiles`` in namespace ``name`` until the block
    ends, then delete it and its bindings. Ready (its informers synced) on entry."""
    image, node = cluster_scheduler_pod(kube)
    try:
        objects.create(
            kube,
            *manifests(name, profiles, image=image, node=node, feature_gates=feature_gates or {}),
        )
        history = StartHistory()
        wait_for(
            f"kube-scheduler {name} to be ready",
            lambda: readiness(kube.get(Pod, "kube-scheduler", namespace=name), history),
            timeout=timeout,
            interval=0.5,
        )
        yield
    finally:
        for role in SCHEDULER_ROLES:
            with contextlib.suppress(ApiError):
                kube.delete(ClusterRoleBinding, binding_name(name, role))
        with contextlib.suppress(ApiError):
            kube.delete(Namespace, name)


def readiness(pod: Pod, history: StartHistory) -> tuple[bool, str]:
    """Whether the scheduler's pod is ready, and what it is doing, for a wait.

    A kube-scheduler that ran and exited did so on its flags or configuration, which a
    restart does not change: that fails the wait at once (``AssertionError``). A start
    the container runtime failed (``StartError``, e.g. runc's cgroup v1 freezer "unable
    to freeze" under load) is retried by the kubelet, so the wait goes on and says so."""
    history.observe([pod])
    ready = pod_ready(pod)
    namespace = pod.metadata.namespace if pod.metadata else "?"
    containers = container_statuses(pod)
    for container in containers:
        ended = last_termination(container)
        if ended is not None and not ready and not runtime_start_failure(ended):
            raise AssertionError(
                f"kube-scheduler {namespace} exited with code {ended.get('exitCode')} "
                f"({ended.get('reason')}): {ended.get('message') or 'no message'}"
            )
    states = [f"{c.get('name')}: {c.get('state')}" for c in containers]
    seen = f"phase {pod.status.phase if pod.status else None}; {'; '.join(states)}"
    if history.runtime_failures():
        seen += f"; {history.summary()}"
    return ready, seen
