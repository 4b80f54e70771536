"""csi-sanity, the CSI spec's own conformance suite, against csi-mock in every setup.

Each setup starts real driver processes on unix sockets and runs the csi-sanity binary
built by `tools/build.sh build csi-sanity`. A missing binary is a failure, not a skip:
CI must never pass without the external judge having run.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc

REPO = Path(__file__).resolve().parents[2]
NODE_KEY = "topology.csi-mock.example/node"


@dataclass(frozen=True)
class Setup:
    name: str
    split: bool = False
    attach: bool = False
    topology: bool = True
    attach_limit: int = 0
    """Also NodeGetInfo's max_volumes_per_node; enables csi-sanity's attach-limit test."""
    extra: dict[str, Any] = field(default_factory=dict)
    mutable_parameters: dict[str, str] | None = None
    """Given to csi-sanity's ModifyVolume specs (--csi.testvolumemutableparameters)."""
    skip_reasons: frozenset[str] | None = None
    """When set, exactly the reasons csi-sanity must give for its skipped specs: a
    capability turned on by the setup that csi-sanity still skips fails the run."""


# What csi-mock does not implement at all, so csi-sanity skips it even with every
# optional feature configured (docs/csi-sanity.md).
NOT_IMPLEMENTED = frozenset(
    {
        "GroupControllerService not supported",
        "SNAPSHOT_ACCESSIBILITY_CONSTRAINTS not supported",
    }
)


NODE_HEALTH = {"volume_health": True, "storage_health": True}
"""The node's CSI v1.13 health RPCs, on in the "everything" setups."""


def everything(accounting: str) -> dict[str, Any]:
    """The controller with snapshots, clones, ControllerModifyVolume and volume health
    configured."""
    return {
        "volume_health": True,
        "snapshots": {"accounting": accounting},
        "clones": True,
        "modify": {"mutable_parameters": {"iops": [], "tier": ["gold", "silver", "bronze"]}},
    }


SETUPS = [
    Setup("combined"),
    Setup("combined-attach", attach=True, attach_limit=4),
    Setup("split-sockets", split=True),
    Setup("split-sockets-attach", split=True, attach=True, attach_limit=4),
    Setup("no-topology", topology=False),
    Setup(
        "everything",
        attach=True,
        attach_limit=4,
        extra={"controller": everything("full"), "node": NODE_HEALTH},
        mutable_parameters={"tier": "silver", "iops": "3000"},
        skip_reasons=NOT_IMPLEMENTED,
    ),
    Setup(
        "split-sockets-everything",
        split=True,
        attach=True,
        attach_limit=4,
        extra={"controller": everything("copy_on_write"), "node": NODE_HEALTH},
        mutable_parameters={"tier": "gold", "iops": "100"},
        skip_reasons=NOT_IMPLEMENTED,
    ),
]


def csi_sanity_binary() -> str:
    explicit = os.environ.get("CSI_SANITY")
    if explicit:
        return explicit
    result = subprocess.run(
        ["bash", str(REPO / "tools" / "build.sh"), "path"],
        capture_output=True,
        text=True,
        check=False,
    )
    candidate = Path(result.stdout.strip()) / "csi-sanity"
    if result.returncode != 0 or not candidate.exists():
        pytest.fail(
            "csi-sanity is not built: run `tools/build.sh build csi-sanity`"
            f" (tools/build.sh path said: {result.stdout.strip() or result.stderr.strip()})"
        )
    return str(candidate)


def driver_config(setup: Setup, root: Path, mode: str, socket: Path) -> dict[str, Any]:
    segment = {NODE_KEY: "node-1"} if setup.topology else {}
    return {
        "mode": mode,
        "endpoint": f"unix://{socket}",
        "state_dir": str(root / f"state-{mode}"),
        "backend_dir": str(root / "volumes"),
        "attach_required": setup.attach,
        "topology": setup.topology,
        "node": {
            "id": "node-1",
            "max_volumes_per_node": setup.attach_limit,
            **setup.extra.get("node", {}),
        },
        "controller": {
            "known_nodes": ["node-1"],
            "attach_limit": setup.attach_limit,
            **setup.extra.get("controller", {}),
        },
        "pools": [{"name": "node-1", "size": "1Ti", "segment": segment}],
        **{key: value for key, value in setup.extra.items() if key not in ("controller", "node")},
    }


def start_driver(config: dict[str, Any], root: Path, label: str) -> subprocess.Popen[bytes]:
    path = root / f"{label}.yaml"
    path.write_text(yaml.safe_dump(config))
    log = (root / f"{label}.log").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "csi_mock.cli", "serve", "--config", str(path)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def wait_ready(socket: Path, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if socket.exists():
            with grpc.insecure_channel(f"unix://{socket}") as channel:
                try:
                    probe = pb_grpc.IdentityStub(channel).Probe(pb.ProbeRequest(), timeout=1)
                    if probe.ready.value:
                        return
                    last = "not ready"
                except grpc.RpcError as error:
                    last = error.code().name
        time.sleep(0.05)
    raise AssertionError(f"driver at {socket} not ready within {timeout}s (last: {last})")


@pytest.fixture
def sanity_root() -> Iterator[Path]:
    # csi-sanity's paths must be short and absolute; unix sockets are limited to 108 bytes.
    root = Path(f"/tmp/csi-mock-sanity-{os.getpid()}")
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    yield root
    shutil.rmtree(root, ignore_errors=True)


@dataclass
class SanityResult:
    passed: int
    failed: list[str]
    skipped: list[str]
    skip_reasons: set[str] = field(default_factory=set)
    """The messages of skipped specs (pending specs have none)."""


def parse_junit(path: Path) -> SanityResult:
    passed, failed, skipped = 0, [], []
    reasons: set[str] = set()
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        name = case.get("name", "?")
        status = case.get("status", "")
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(name)
        elif case.find("skipped") is not None or status in ("skipped", "pending"):
            skipped.append(name)
            marker = case.find("skipped")
            message = marker.get("message", "") if marker is not None else ""
            if status == "skipped" and message:
                reasons.add(message.removeprefix("skipped - "))
        else:
            passed += 1
    return SanityResult(passed, failed, skipped, reasons)


@pytest.mark.parametrize("setup", SETUPS, ids=[s.name for s in SETUPS])
def test_csi_sanity_passes_with_no_failures(setup: Setup, sanity_root: Path) -> None:
    binary = csi_sanity_binary()
    processes: list[subprocess.Popen[bytes]] = []
    node_socket = sanity_root / "node.sock"
    controller_socket = node_socket
    try:
        if setup.split:
            controller_socket = sanity_root / "controller.sock"
            for mode, socket in (("controller", controller_socket), ("node", node_socket)):
                processes.append(
                    start_driver(driver_config(setup, sanity_root, mode, socket), sanity_root, mode)
                )
        else:
            config = driver_config(setup, sanity_root, "all", node_socket)
            processes.append(start_driver(config, sanity_root, "all"))
        for socket in {node_socket, controller_socket}:
            wait_ready(socket)

        report = sanity_root / "junit.xml"
        command = [
            binary,
            f"--csi.endpoint={node_socket}",
            f"--csi.mountdir={sanity_root}/mnt",
            f"--csi.stagingdir={sanity_root}/stage",
            f"--ginkgo.junit-report={report}",
            "--ginkgo.no-color",
            "--ginkgo.timeout=10m",
        ]
        if setup.attach_limit:
            command.append("--csi.testnodevolumeattachlimit")
        if setup.split:
            command.append(f"--csi.controllerendpoint={controller_socket}")
        if setup.mutable_parameters is not None:
            parameters = sanity_root / "mutable-parameters.yaml"
            parameters.write_text(yaml.safe_dump(setup.mutable_parameters))
            command.append(f"--csi.testvolumemutableparameters={parameters}")
        run = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
        assert report.exists(), f"csi-sanity wrote no report:\n{run.stdout[-3000:]}"
        result = parse_junit(report)
        keep = os.environ.get("CSI_SANITY_REPORTS")
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(report, Path(keep) / f"csi-sanity-{setup.name}.xml")
        summary = (
            f"csi-sanity [{setup.name}]: {result.passed} passed, {len(result.failed)} failed,"
            f" {len(result.skipped)} skipped"
        )
        print(summary)
        assert not result.failed, summary + "\n" + "\n".join(result.failed) + run.stdout[-6000:]
        assert run.returncode == 0, run.stdout[-6000:]
        assert result.passed >= 30, f"suspiciously few specs ran: {summary}"
        if setup.skip_reasons is not None:
            assert result.skip_reasons == setup.skip_reasons, (
                f"{summary}; skipped for other reasons than expected: "
                f"unexpected {sorted(result.skip_reasons - setup.skip_reasons)}, "
                f"missing {sorted(setup.skip_reasons - result.skip_reasons)}"
            )
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        leftovers = [
            line.split()[4]
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if f" {sanity_root}/" in line
        ]
        for mount_point in sorted(leftovers, reverse=True):
            subprocess.run(["umount", "-l", mount_point], check=False)
        assert not leftovers, f"mounts left behind: {leftovers}"
