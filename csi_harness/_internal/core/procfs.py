"""A process's ``/proc/<pid>/stat`` (proc(5)), read in one place.

The command name (field 2) is in parentheses and may itself contain spaces and
parentheses; the fields after the last ")" are fixed, so they are counted from there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
"""The unit of the times in ``/proc/<pid>/stat``, per second."""


@dataclass(frozen=True)
class ProcessStat:
    state: str
    """R, S, D, Z (zombie), T, ..."""
    ppid: int
    utime: int
    """User time, in clock ticks; ``stime`` the system time."""
    stime: int
    cutime: int
    """User time of the children it waited for, in clock ticks; ``cstime`` their system time."""
    cstime: int
    start_time: int
    """When the process started, in clock ticks since boot: with the pid, it names
    one process (a pid is reused, the pair is not)."""

    @property
    def cpu_seconds(self) -> float:
        """User and system time, its own and its waited-for children's."""
        return (self.utime + self.stime + self.cutime + self.cstime) / CLOCK_TICKS


def parse_stat(text: str) -> ProcessStat:
    """The fields of a ``/proc/<pid>/stat`` line; ValueError if it is not one."""
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is field 3 of proc(5) (state), fields[1] field 4 (ppid), ...
    return ProcessStat(
        state=fields[0],
        ppid=int(fields[1]),
        utime=int(fields[11]),
        stime=int(fields[12]),
        cutime=int(fields[13]),
        cstime=int(fields[14]),
        start_time=int(fields[19]),
    )


def read_stat(pid: int) -> ProcessStat | None:
    """``pid``'s stat, or None when there is no such process (any more)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return parse_stat(text)


def read_host_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of all the host's CPUs so far, from /proc/stat."""
    # user nice system idle iowait irq softirq steal (guest time is inside user/nice)
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)
