import time

import pytest

from csi_harness._internal.core.waiting import (
    TIME_SCALE_VARIABLE,
    WaitTimeout,
    scaled,
    time_scale,
    wait_for,
)


def test_wait_for_returns_the_value_of_the_first_successful_probe() -> None:
    answers = iter([(False, "starting"), (False, "starting"), (True, "ready")])
    assert wait_for("the thing", lambda: next(answers), timeout=5, interval=0) == "ready"


def test_wait_for_polls_until_the_probe_succeeds() -> None:
    calls: list[None] = []

    def probe() -> tuple[bool, int]:
        calls.append(None)
        return len(calls) == 3, len(calls)

    assert wait_for("three calls", probe, timeout=5, interval=0) == 3


def test_timeout_message_names_what_was_awaited_and_the_last_observation() -> None:
    observations = iter(range(1000))

    def probe() -> tuple[bool, str]:
        return False, f"phase {next(observations)}"

    with pytest.raises(WaitTimeout) as raised:
        wait_for("node-1 to be Ready", probe, timeout=0.05, interval=0.01)
    message = str(raised.value)
    assert "waiting for node-1 to be Ready" in message
    assert message.endswith(f"last seen: phase {next(observations) - 1}")


def test_wait_timeout_is_a_timeout_error() -> None:
    with pytest.raises(TimeoutError):
        wait_for("never", lambda: (False, None), timeout=0.01, interval=0.005)


def test_probe_exceptions_become_observations() -> None:
    def probe() -> tuple[bool, None]:
        raise ConnectionRefusedError("dial 127.0.0.1:6443")

    with pytest.raises(
        WaitTimeout, match=r"last seen: ConnectionRefusedError: dial 127.0.0.1:6443"
    ):
        wait_for("the apiserver", probe, timeout=0.05, interval=0.01)


def test_an_assertion_in_a_probe_ends_the_wait_though_a_later_probe_would_succeed() -> None:
    calls: list[None] = []

    def probe() -> tuple[bool, str]:
        calls.append(None)
        assert len(calls) > 1, "seen in the wrong order"
        return True, "done"

    with pytest.raises(AssertionError, match="wrong order"):
        wait_for("events in order", probe, timeout=5, interval=0)
    assert len(calls) == 1


@pytest.mark.parametrize(
    "bug",
    [
        TypeError("unsupported operand type(s) for +: 'int' and 'str'"),
        NameError("name 'read_stat' is not defined"),
    ],
    ids=["TypeError", "NameError"],
)
def test_a_probe_with_a_bug_fails_at_once_instead_of_running_out_the_timeout(
    bug: Exception,
) -> None:
    calls: list[None] = []

    def probe() -> tuple[bool, str]:
        calls.append(None)
        raise bug

    started = time.monotonic()
    with pytest.raises(type(bug)):
        wait_for("a buggy probe", probe, timeout=5, interval=0.01)
    assert len(calls) == 1
    assert time.monotonic() - started < 1


@pytest.mark.parametrize(
    "transient",
    [FileNotFoundError("no socket yet"), TimeoutError("read timed out"), KeyError("status")],
    ids=["OSError", "TimeoutError", "KeyError"],
)
def test_transient_errors_are_retried_until_the_probe_succeeds(transient: Exception) -> None:
    answers: list[Exception | tuple[bool, str]] = [transient, transient, (True, "up")]

    def probe() -> tuple[bool, str]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert wait_for("a server", probe, timeout=5, interval=0) == "up"


def test_a_probe_that_fails_then_succeeds_returns_the_value() -> None:
    calls: list[None] = []

    def probe() -> tuple[bool, str]:
        calls.append(None)
        if len(calls) == 1:
            raise ConnectionRefusedError("not yet")
        return True, "up"

    assert wait_for("the apiserver", probe, timeout=5, interval=0) == "up"


def test_check_raising_ends_the_wait_at_once() -> None:
    probes: list[None] = []

    def probe() -> tuple[bool, None]:
        probes.append(None)
        return False, None

    def check() -> None:
        raise RuntimeError("etcd exited with code 1")

    started = time.monotonic()
    with pytest.raises(RuntimeError, match="etcd exited"):
        wait_for("the apiserver", probe, timeout=60, check=check)
    assert time.monotonic() - started < 1
    assert probes == []


def test_check_runs_before_every_probe() -> None:
    events: list[str] = []

    def probe() -> tuple[bool, None]:
        events.append("probe")
        return len(events) >= 6, None

    wait_for("x", probe, timeout=5, interval=0, check=lambda: events.append("check"))
    assert events == ["check", "probe"] * 3


def test_a_time_scale_lets_a_wait_run_that_many_times_as_long(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TIME_SCALE_VARIABLE, "5")
    started = time.monotonic()

    def probe() -> tuple[bool, float]:
        elapsed = time.monotonic() - started
        return elapsed >= 0.3, elapsed

    assert wait_for("a slow thing", probe, timeout=0.1, interval=0.01) >= 0.3


def test_a_scaled_timeout_says_what_it_was_written_as_and_by_what_it_grew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert scaled(90) == (90, "90s")
    monkeypatch.setenv(TIME_SCALE_VARIABLE, "2.5")

    assert scaled(90) == (225, "225s (90s x 2.5 from CSI_HARNESS_TIME_SCALE)")


@pytest.mark.parametrize("text", ["0.5", "0", "-2", "fast", "nan", "inf"])
def test_a_time_scale_that_is_not_one_or_more_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv(TIME_SCALE_VARIABLE, text)

    with pytest.raises(
        ValueError, match=f"^CSI_HARNESS_TIME_SCALE: expected a number of 1 or more, got '{text}'$"
    ):
        wait_for("anything", lambda: (True, None), timeout=1)


def test_an_unset_or_empty_time_scale_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIME_SCALE_VARIABLE, raising=False)
    assert time_scale() == 1
    monkeypatch.setenv(TIME_SCALE_VARIABLE, " ")
    assert time_scale() == 1
