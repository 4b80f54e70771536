"""/proc/<pid>/stat, read in one place."""

from __future__ import annotations

import os

from csi_harness._internal.core.procfs import CLOCK_TICKS, parse_stat, read_stat

# proc(5) fields 1-22: pid (comm) state ppid pgrp session tty_nr tpgid flags minflt
# cminflt majflt cmajflt utime stime cutime cstime priority nice num_threads
# itrealvalue starttime
STAT = "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 30 12 5 3 20 0 1 0 987654 1"


def test_fields_count_from_the_last_parenthesis_so_any_command_name_parses() -> None:
    stat = parse_stat(STAT)
    assert (stat.state, stat.ppid, stat.start_time) == ("S", 17, 987654)
    assert (stat.utime, stat.stime, stat.cutime, stat.cstime) == (30, 12, 5, 3)
    assert stat.cpu_seconds == 50 / CLOCK_TICKS


def test_this_process_is_read_with_its_parent() -> None:
    stat = read_stat(os.getpid())
    assert stat is not None
    assert stat.ppid == os.getppid()
    assert stat.state == "R"


def test_a_process_that_is_gone_has_no_stat() -> None:
    assert read_stat(2**22 + 1) is None  # above pid_max's largest possible value
