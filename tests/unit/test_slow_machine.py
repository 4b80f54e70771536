"""The slow-machine benchmark wrapper (benchmarks/slow_machine.py): what it refuses before
it starts any spinner, and that its spinners take the share of a CPU they are given."""

from __future__ import annotations

import os
import time

import pytest

from benchmarks import slow_machine
from benchmarks.bench_rpc import cpu_seconds


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--factor", "2"], "no command given"),
        (["--factor", "1", "--", "true"], "--factor must be more than 1, not 1.0"),
        (["--factor", "2", "--period-ms", "0.5", "--", "true"], "--period-ms must be 1 to 100"),
    ],
)
def test_bad_arguments_are_refused_by_name(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        slow_machine.main(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO needs root")
def test_each_spinner_takes_the_share_of_its_cpu_it_is_given() -> None:
    if others := _real_time_processes():
        pytest.skip(
            f"real-time processes share the CPUs (the suite slowed by this tool?): {others}"
        )
    pids = slow_machine.start_spinners(0.5, 0.01)
    try:
        time.sleep(0.3)
        before = [cpu_seconds(pid) for pid in pids]
        began = time.monotonic()
        time.sleep(2)
        elapsed = time.monotonic() - began
        shares = [(cpu_seconds(pid) - b) / elapsed for pid, b in zip(pids, before, strict=True)]
    finally:
        slow_machine.stop_spinners(pids)
    assert len(pids) == len(os.sched_getaffinity(0))
    assert all(0.4 < share < 0.6 for share in shares), shares


def _real_time_processes() -> list[int]:
    """User-space processes (kernel threads have no command line) under SCHED_FIFO/RR."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as cmdline:
                if not cmdline.read():
                    continue
            policy = os.sched_getscheduler(int(entry.name))
        except OSError:  # the process ended meanwhile
            continue
        if policy in (os.SCHED_FIFO, os.SCHED_RR):
            found.append(int(entry.name))
    return found
