"""Unpacking the baked images on each node as ``kind create`` makes it: every node
found is asked once, for every image, also one that shows up only as ``kind create``
returns; a node that fails is reported with what it said, the others are not held up.
Docker is stood in for by a function that answers ``docker ps`` and ``docker exec``."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from csi_harness._internal.providers.kind import unpacked_images
from csi_harness._internal.providers.kind.unpacked_images import Unpacking

IMAGES = ["csi-mock.local/csi-mock:dev", "csi-mock.local/busybox:1"]


class FakeDocker:
    """The node containers that run, and the ``docker exec`` calls made into them."""

    def __init__(self, failing: dict[str, str] | None = None) -> None:
        self.running: list[str] = []
        self.failing = failing or {}
        self.execs: list[tuple[str, list[str]]] = []
        self.lock = threading.Lock()
        self.scans = 0

    def run(self, argv: Sequence[str], **_: Any) -> subprocess.CompletedProcess[str]:
        if list(argv[:2]) == ["docker", "ps"]:
            assert "label=io.x-k8s.kind.cluster=c1" in argv
            with self.lock:
                self.scans += 1
                names = "\n".join(self.running)
            return subprocess.CompletedProcess(argv, 0, names + "\n", "")
        assert list(argv[:2]) == ["docker", "exec"]
        node = argv[2]
        # sh -c SCRIPT $0 images...: the images are the script's arguments.
        assert list(argv[3:5]) == ["sh", "-c"]
        with self.lock:
            self.execs.append((node, list(argv[7:])))
        if node in self.failing:
            return subprocess.CompletedProcess(argv, 1, "", self.failing[node])
        return subprocess.CompletedProcess(argv, 0, "", "")


@pytest.fixture
def docker(monkeypatch: pytest.MonkeyPatch) -> FakeDocker:
    fake = FakeDocker()
    monkeypatch.setattr(unpacked_images.subprocess, "run", fake.run)
    monkeypatch.setattr(unpacked_images, "SCAN_INTERVAL", 0.01)
    return fake


def test_each_node_unpacks_every_image_once_as_it_appears(docker: FakeDocker) -> None:
    unpacking = Unpacking("c1", IMAGES).start()
    docker.running = ["c1-control-plane"]
    while docker.scans < 3:
        threading.Event().wait(0.01)
    docker.running = ["c1-control-plane", "c1-worker", "c1-worker2"]
    unpacking.nodes_made()
    assert unpacking.wait() == {}
    assert sorted(docker.execs) == [
        ("c1-control-plane", IMAGES),
        ("c1-worker", IMAGES),
        ("c1-worker2", IMAGES),
    ]


def test_a_node_seen_only_when_kind_create_returns_is_unpacked_too(docker: FakeDocker) -> None:
    unpacking = Unpacking("c1", IMAGES).start()
    docker.running = ["c1-control-plane", "c1-worker"]
    unpacking.nodes_made()  # the last look finds both
    assert unpacking.wait() == {}
    assert sorted(node for node, _ in docker.execs) == ["c1-control-plane", "c1-worker"]


def test_a_node_that_cannot_unpack_is_reported_with_what_it_said(docker: FakeDocker) -> None:
    docker.failing = {"c1-worker": "ctr: image not found"}
    docker.running = ["c1-control-plane", "c1-worker"]
    unpacking = Unpacking("c1", IMAGES).start()
    assert unpacking.wait() == {"c1-worker": "ctr: image not found"}
    assert len(docker.execs) == 2


def test_the_script_waits_for_containerd_and_unpacks_each_argument(tmp_path: Path) -> None:
    # The script's own shell, with a ctr that logs its arguments and answers "version"
    # only from its second try: each image is mounted, then unmounted with --rm.
    log, up = tmp_path / "ctr.log", tmp_path / "up"
    ctr = (
        f'echo "$@" >> {log}; '
        f'case "$*" in *version*) [ -e {up} ] || {{ touch {up}; return 1; }} ;; esac'
    )
    result = subprocess.run(
        ["sh", "-c", f"ctr() {{ {ctr}; }}\n{unpacked_images._SCRIPT}", "unpack", *IMAGES],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = log.read_text().splitlines()
    assert lines[:2] == ["--namespace k8s.io version", "--namespace k8s.io version"]
    mounts = [line.split()[4] for line in lines if " images mount " in line]
    assert mounts == IMAGES
    assert sum(" images unmount --rm " in line for line in lines) == len(IMAGES)
