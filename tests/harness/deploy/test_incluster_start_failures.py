"""InClusterDriver's deploy through the container runtime's failures (a stand-in API,
tests/harness/deploy/fake_api.py): a container the runtime failed to start is waited
for and the runtime named, only a container that ran and exited counts as a crash, and
restarts before the driver is ready are part of its deployment."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from csi_harness._internal.core import waiting
from csi_harness._internal.core.waiting import WaitTimeout
from csi_harness._internal.deploy.incluster import DriverPodsFailed
from tests.harness.deploy.fake_api import FakeApi, ready_status
from tests.harness.deploy.test_incluster_driver import make_driver
from tests.harness.kube.test_pod_status import BACK_OFF, crash, start_error


class Polls:
    """Stands in for ``time`` in the wait loop: counts its sleeps, one per poll, so that
    a pod status can change from one poll to the next as a kubelet's does between
    attempts (the kubelet backs off 10 s and more, the harness polls every second)."""

    def __init__(self) -> None:
        self.count = 0
        self.monotonic = time.monotonic

    def sleep(self, _: float) -> None:
        self.count += 1
        time.sleep(0.005)


@pytest.fixture
def polls(monkeypatch: pytest.MonkeyPatch) -> Polls:
    counted = Polls()
    monkeypatch.setattr(waiting, "time", counted)
    return counted


def attacher_timeline(polls: Polls, *attempts: dict[str, Any]) -> Any:
    """A pod status function: at poll N, the controller pod's csi-attacher container in
    back-off after ``attempts[N]`` (a ``terminated`` state, the same attempt while its
    containerID stays), then running and ready once they are used up."""

    def status(role: str, node: str) -> dict[str, Any]:
        if role != "controller":
            return ready_status(role, node)
        shown = attempts[: polls.count + 1]
        tried = len({attempt["containerID"] for attempt in shown})
        container = {"name": "csi-attacher", "image": "i", "imageID": "", "ready": False}
        if polls.count >= len(attempts):
            running = {"running": {"startedAt": "2026-11-28T08:43:53Z"}}
            last = {"terminated": attempts[-1]} if attempts else {}
            return {
                **ready_status(role, node),
                "containerStatuses": [
                    {
                        **container,
                        "ready": True,
                        "restartCount": tried,
                        "state": running,
                        "lastState": last,
                    }
                ],
            }
        return {
            "phase": "Running",
            "containerStatuses": [
                {
                    **container,
                    "restartCount": tried - 1,
                    "state": BACK_OFF,
                    "lastState": {"terminated": shown[-1]},
                }
            ],
        }

    return status


def test_a_sidecar_the_runtime_fails_to_start_is_waited_for_and_the_runtime_named(
    tmp_path: Path,
    polls: Polls,
) -> None:
    # Four failed starts (restartCount 3 in back-off, a crash loop's count), each read
    # twice, then the attacher runs.
    attempts = [start_error(n) for n in range(1, 5) for _ in range(2)]
    api = FakeApi(
        nodes=["worker", "worker2"],
        pod_status=attacher_timeline(polls, *attempts),
        live_status=True,
    )
    said: list[str] = []
    driver = make_driver(api, tmp_path, timeout=30)
    driver.progress = said.append
    driver.deploy()
    failures = driver.start_history.runtime_failures()
    assert len(failures) == 1
    assert "/csi-attacher: the container runtime failed to start it 4 times" in failures[0]
    started = [line for line in said if "the container runtime failed to start it" in line]
    assert len(started) == 4 and all("the kubelet retries" in line for line in started)


def test_a_crash_after_failed_starts_counts_once(tmp_path: Path, polls: Polls) -> None:
    # Three failed starts, then it ran and exited: restartCount 3, but one crash.
    attempts = [start_error(1), start_error(2), start_error(3), crash(4), crash(4)]
    api = FakeApi(
        nodes=["worker", "worker2"],
        pod_status=attacher_timeline(polls, *attempts),
        live_status=True,
    )
    make_driver(api, tmp_path, timeout=30).deploy()


def test_restarts_before_the_driver_is_ready_are_part_of_its_deployment(
    tmp_path: Path, polls: Polls
) -> None:
    # The attacher exits twice while the driver starts (restartCount 2 once it runs):
    # the deployment is as any other, so the pool may keep it. A restart after that is
    # a component that died under a test.
    attempts = [start_error(1), crash(2)]
    timeline = attacher_timeline(polls, *attempts)
    restarts_later = 0

    def status(role: str, node: str) -> dict[str, Any]:
        shown = timeline(role, node)
        for container in shown.get("containerStatuses", []):
            container["restartCount"] += restarts_later
        return shown

    api = FakeApi(nodes=["worker", "worker2"], pod_status=status, live_status=True)
    said: list[str] = []
    driver = make_driver(api, tmp_path, timeout=30)
    driver.progress = said.append
    driver.deploy()
    (controller,) = api.pod_names("controller")

    assert driver.failed_component() is None
    assert f"restarted while starting: {controller}/csi-attacher" in said[-1]
    restarts_later = 1
    assert driver.failed_component() == f"restarted: {controller}/csi-attacher"


def test_a_timeout_through_failed_starts_names_the_runtime_not_a_crash(
    tmp_path: Path, polls: Polls
) -> None:
    froze = start_error(1, "runc create failed: error setting cgroup config: unable to freeze")
    api = FakeApi(
        nodes=["worker", "worker2"],
        pod_status=attacher_timeline(polls, *[froze] * 100_000),
        live_status=True,
    )
    with pytest.raises(WaitTimeout) as failure:
        make_driver(api, tmp_path, timeout=1).deploy()
    message = str(failure.value)
    assert "the container runtime failed to start it once" in message
    assert "unable to freeze" in message and "not counted as crashes" in message
    assert "crashed" not in message


def test_the_runtime_failures_are_named_when_the_driver_crashes(
    tmp_path: Path, polls: Polls
) -> None:
    attempts = [start_error(1), *(crash(n) for n in range(2, 6))]
    api = FakeApi(
        nodes=["worker", "worker2"],
        pod_status=attacher_timeline(polls, *attempts, *[crash(5)] * 100_000),
        live_status=True,
    )
    with pytest.raises(DriverPodsFailed) as failure:
        make_driver(api, tmp_path, timeout=30).deploy()
    message = str(failure.value)
    assert "csi-attacher crashed 3 times (and the runtime failed to start it once" in message
    assert "the container runtime failed to start it once" in message
