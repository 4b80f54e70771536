"""The on-disk record of one local cluster run: ``<run dir>/run.json``.

It is rewritten after every change (process started, port allocated), so that
``down`` and the next ``up`` can clean up after a harness that crashed.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
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
    ports: dict[str, int] = field(default_factory=dict)
    processes: dict[str, ProcessRecord] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    cgroup_root: str = ""
    bridge: str = ""
    extra_dirs: list[str] = field(default_factory=list)
    """Directories outside run_dir this run created (removed at teardown)."""
    started_at: float = 0.0
    ready_after: float | None = None
    config: dict[str, Any] = field(default_factory=dict)
    """The LocalClusterConfig the cluster runs with now (its driver and scheduler
    follow redeploys), so another process can attach to the cluster."""

    @property
    def path(self) -> Path:
        return self.run_dir / STATE_FILE

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
