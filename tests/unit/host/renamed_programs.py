"""Stand-ins for a pod's other programs: ``sleep`` started under another program's name
(its argv[0]), as csi_mock.host.neighbours finds them, and their state from /proc."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


def start_renamed(name: str) -> subprocess.Popen[bytes]:
    """``sleep 300`` whose argv[0] is ``name``, once /proc shows that name: Popen returns
    as the exec begins, before the new program's argv is in place (its
    /proc/<pid>/cmdline is empty for a moment)."""
    process = subprocess.Popen([name, "300"], executable="/bin/sleep")
    cmdline = Path(f"/proc/{process.pid}/cmdline")
    deadline = time.monotonic() + 5
    while not cmdline.read_bytes().startswith(name.encode() + b"\0"):
        assert time.monotonic() < deadline, f"{process.pid} never showed {name} as its argv[0]"
        time.sleep(0.005)
    return process


def is_stopped(pid: int) -> bool:
    """Stopped by a signal (T) or held by a tracer (t)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] in "Tt"
