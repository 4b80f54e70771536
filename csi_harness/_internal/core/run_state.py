"""The on-disk record of one local cluster run: ``<run dir>/run.json``.

It is rewritten after every change (process started, port allocated), so that
``down`` and the next ``up`` can clean up after a harness that crashed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

STATE_FILE = "run.json"


@dataclass
class ProcessRecord:
    name: str
    pid: int
    start_time: int
    argv: list[str]
    log: str


@dataclass
class RunState:
    run_dir: Path
    cluster: str = ""
    phase: str = "starting"  # starting | ready | failed | stopping
    ports: dict[str, int] = dataclass_field(default_factory=dict)
    processes: dict[str, ProcessRecord] = dataclass_field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = dataclass_field(default_factory=dict)
    cgroup_root: str = ""
    bridge: str = ""
    extra_dirs: list[str] = dataclass_field(default_factory=list)
    """Directories outside run_dir this run created (removed at teardown)."""
    started_at: float = 0.0
    ready_after: float | None = None
    config: dict[str, Any] = dataclass_field(default_factory=dict)
    """The LocalClusterConfig the cluster runs with now (its driver and scheduler
    follow redeploys), so another process can attach to the cluster."""

    @property
    def path(self) -> Path:
        return self.run_dir / STATE_FILE

    @contextlib.contextmanager
    def locked(self) -> Iterator[RunState]:
        """Change the record with the other processes of this run in mind: several
        pytest workers attach to one cluster and start their drivers' processes at
        the same time. Under an exclusive lock this reloads what is on disk into
        ``self``, lets the caller change it and saves it, so no change is lost."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with (self.run_dir / f"{STATE_FILE}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                current = RunState.load(self.run_dir)
                if current is not None:
                    for f in fields(self):
                        setattr(self, f.name, getattr(current, f.name))
                yield self
                self.save()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def save(self) -> None:
        data = asdict(self)
        data["run_dir"] = str(self.run_dir)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
        os.replace(tmp, self.path)

    @classmethod
    def load(cls, run_dir: Path) -> RunState | None:
        try:
            data = json.loads((run_dir / STATE_FILE).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"{run_dir / STATE_FILE}: unreadable run state: {exc}") from exc
        try:
            data["run_dir"] = Path(data["run_dir"])
            data["processes"] = {
                k: ProcessRecord(**v) for k, v in data.get("processes", {}).items()
            }
            return cls(**data)
        except (TypeError, KeyError, AttributeError) as exc:
            raise RuntimeError(
                f"{run_dir / STATE_FILE}: not a run state of this harness version ({exc}); "
                "remove the directory by hand"
            ) from exc
