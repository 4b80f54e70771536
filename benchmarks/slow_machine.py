"""Run a command on this machine made N times slower, to measure what a slower CI machine would.

Per CPU, a real-time (SCHED_FIFO) process pinned to that CPU spins for a share of every
period and sleeps for the rest. A real-time task runs before every ordinary one, so every
other process of the machine (the command, its children, Docker's containers and the
kubelets' pods, whatever cgroup they are in) gets only the rest of each CPU, in slices of
the period.
The kernel's own limit on real-time tasks (sched_rt_runtime_us, 95 % by default) stays in
force, so a spinner that outlives its parent cannot take a CPU whole; each spinner also
dies with this process (PR_SET_PDEATHSIG).

    python benchmarks/slow_machine.py --factor 2.7 [--period-ms 10] -- bash .ci/run

How much to spin is measured, not computed: a fixed CPU-bound loop, one process per CPU, is
timed alone and then with the spinners, and the share they spin is corrected until the loop
runs ``--factor`` times slower (within 3 %, at most four rounds). Prints the slowdown
reached, then the command's wall time and exit status, and exits with the command's status.
Needs root (SCHED_FIFO).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

PR_SET_PDEATHSIG = 1
CALIBRATION_LOOPS = 20_000_000
CALIBRATION_ROUNDS = 4
MIN_LEFT = 0.1  # never spin more than 90 % of a period


def spin(cpu: int, busy: float, period: float) -> None:
    """Spin on CPU ``cpu`` for ``busy`` of every ``period`` seconds until killed.

    Periods start at multiples of ``period`` on the monotonic clock, so the spinners of all
    CPUs spin at the same time: a single-threaded process cannot move to a CPU whose
    spinner happens to sleep and get more than its share."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    while True:
        now = time.monotonic()
        start = now - now % period
        while time.monotonic() < start + busy:
            pass
        time.sleep(max(0.0, start + period - time.monotonic()))


def start_spinners(share: float, period: float) -> list[int]:
    """One spinner per CPU, spinning ``share`` of every ``period`` seconds."""
    pids = []
    for cpu in sorted(os.sched_getaffinity(0)):
        pid = os.fork()
        if pid == 0:
            try:
                spin(cpu, share * period, period)
            finally:
                os._exit(1)
        pids.append(pid)
    return pids


def stop_spinners(pids: Sequence[int]) -> None:
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def calibration_seconds() -> float:
    """Wall time of a fixed CPU-bound loop run at once in one ordinary process per CPU
    (median of three), as the command's many processes load every CPU."""
    code = (
        "import time; t = time.monotonic(); "
        f"sum(range({CALIBRATION_LOOPS})); print(time.monotonic() - t)"
    )
    walls = []
    for _ in range(3):
        loops = [
            subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
            for _ in os.sched_getaffinity(0)
        ]
        walls.append(max(float(loop.communicate()[0]) for loop in loops))
    return sorted(walls)[1]


def calibrated_spinners(factor: float, period: float) -> tuple[list[int], float]:
    """Spinners that make the calibration loop ``factor`` times slower, and the slowdown
    reached. A CPU runs faster in the spinners' pauses than when it is left alone (seen on
    this VM: spinning 63 % of each period slowed the loop 2.3 times, not 2.7), so the
    share spun is found by measuring: a few rounds, each correcting the share of time left
    to others by the ratio of the slowdown reached to the one asked for."""
    alone = calibration_seconds()
    left = 1 / factor
    pids: list[int] = []
    reached = 1.0
    for _ in range(CALIBRATION_ROUNDS):
        stop_spinners(pids)
        pids = start_spinners(1 - left, period)
        reached = calibration_seconds() / alone
        if abs(reached - factor) / factor < 0.03:
            break
        left = max(MIN_LEFT, min(1.0, left * reached / factor))
    return pids, reached


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--factor", type=float, required=True, help="how many times slower (> 1)")
    parser.add_argument(
        "--period-ms", type=float, default=10.0, help="length of one spin and sleep (default 10)"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    if args.factor <= 1:
        parser.error(f"--factor must be more than 1, not {args.factor}")
    if not 1 <= args.period_ms <= 100:
        parser.error(f"--period-ms must be 1 to 100, not {args.period_ms}")
    if os.geteuid() != 0:
        parser.error("needs root: the spinners are SCHED_FIFO")

    pids, reached = calibrated_spinners(args.factor, args.period_ms / 1000)
    try:
        print(
            f"slow_machine: the calibration loop runs {reached:.2f} times slower"
            f" (asked {args.factor})",
            flush=True,
        )
        began = time.monotonic()
        status = subprocess.call(command)
        wall = time.monotonic() - began
    finally:
        stop_spinners(pids)
    print(f"slow_machine: {' '.join(command)} exited {status} after {wall:.0f} s", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
