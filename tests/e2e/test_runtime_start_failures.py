"""Start errors are not crashes (issue 47): a sidecar the container runtime fails to
start a few times, then starts, on a real kubelet.

The sidecar's command is an executable on an emptyDir that does not exist yet, so
runc's exec fails and the kubelet reports what it reported for the cgroup v1 freezer
failure on kind (``lastState.terminated``: ``StartError``, exit 128, ``startedAt``
1970-01-01T00:00:00Z; ``state.waiting``: ``RunContainerError`` then
``CrashLoopBackOff``) and retries with back-off. After four failed starts (restartCount
3 in back-off: a crash loop by count), the test writes the executable from the pod's
other container, and the harness's wait, which ran all along, sees the pod Ready and
says the runtime failed to start the sidecar four times, not that it crashed.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import pytest
from lightkube import Client
from lightkube.codecs import from_dict
from lightkube.resources.core_v1 import Pod

from csi_harness._internal.core.tools import tool_path
from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.kube.pod_status import CRASH_LOOP_RESTARTS
from csi_harness._internal.kube.waits import wait_pods_ready
from csi_harness._internal.providers.base import Cluster

pytestmark = pytest.mark.e2e

FEATURE = "harness waits"
FAILED_STARTS = CRASH_LOOP_RESTARTS + 1
"""Enough for restartCount to reach a crash loop's count while the sidecar is in back-off."""
WAIT_TIMEOUT = 240.0
"""The kubelet backs off 10 s, 20 s, 40 s between attempts: four failed starts and the
one that succeeds take about 75 s."""
LABELS = {"app": "late-sidecar"}
SCRIPT = "#!/bin/sh\nexec sleep 3600\n"


def late_sidecar_pod(namespace: str, node: str) -> dict[str, Any]:
    """``app`` runs; ``sidecar`` runs /late/run, which nobody has written yet."""
    volume_mounts = [{"name": "late", "mountPath": "/late"}]
    container = {"image": "csi-mock.local/busybox:1", "imagePullPolicy": "Never"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "late", "namespace": namespace, "labels": LABELS},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    **container,
                    "name": "app",
                    "command": ["sleep", "3600"],
                    "volumeMounts": volume_mounts,
                },
                {
                    **container,
                    "name": "sidecar",
                    "command": ["/late/run"],
                    "volumeMounts": volume_mounts,
                },
            ],
            "volumes": [{"name": "late", "emptyDir": {}}],
        },
    }


def write_the_executable(cluster: Cluster, namespace: str) -> None:
    subprocess.run(
        [
            tool_path("kubectl"),
            f"--kubeconfig={cluster.kubeconfig}",
            f"--namespace={namespace}",
            "exec",
            "late",
            "--container=app",
            "--",
            "sh",
            "-c",
            f"printf '{SCRIPT.encode('unicode_escape').decode()}' > /late/run.tmp"
            " && chmod +x /late/run.tmp && mv /late/run.tmp /late/run",
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.real_nodes_only
@pytest.mark.scenario(
    FEATURE, "a sidecar the runtime fails to start is waited for and not called a crash"
)
def test_a_sidecar_the_runtime_fails_to_start_a_few_times_is_waited_for_not_called_a_crash(
    cluster: Cluster, kube: Client, namespace: str, pod_node: str
) -> None:
    kube.create(cast(Any, from_dict(late_sidecar_pod(namespace, pod_node))))
    said: list[str] = []
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(
            wait_pods_ready,
            kube,
            namespace,
            labels=LABELS,
            timeout=WAIT_TIMEOUT,
            progress=said.append,
        )
        wait_for(
            f"{FAILED_STARTS} failed starts said by the harness's wait",
            lambda: (len(said) >= FAILED_STARTS or waiting.done(), said),
            timeout=WAIT_TIMEOUT,
            interval=0.5,
        )
        write_the_executable(cluster, namespace)
        history = waiting.result()

    pod = kube.get(Pod, "late", namespace=namespace).to_dict()
    (sidecar,) = [s for s in pod["status"]["containerStatuses"] if s["name"] == "sidecar"]
    print("the kubelet's status of the sidecar:", sidecar)
    print(history.summary())
    assert sidecar["ready"] and "running" in sidecar["state"]
    assert sidecar["restartCount"] >= CRASH_LOOP_RESTARTS  # a crash loop, had it counted them
    assert sidecar["lastState"]["terminated"]["reason"] == "StartError"
    (failures,) = history.runtime_failures()
    assert failures.startswith(
        f"late/sidecar: the container runtime failed to start it {FAILED_STARTS} times"
    )
    assert 'exec: "/late/run"' in failures
    assert len(said) == FAILED_STARTS
    assert all("the container runtime failed to start it" in line for line in said)
    assert "not counted as crashes" in history.summary()
