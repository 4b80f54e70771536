"""Requests and observations for the snapshot, restore and clone tests."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.driver.csi_helpers import create_request

if TYPE_CHECKING:
    from tests.driver.conftest import RunningDriver

RPC = pb.ControllerServiceCapability.RPC
SNAPSHOT_RPCS = {RPC.CREATE_DELETE_SNAPSHOT, RPC.LIST_SNAPSHOTS, RPC.GET_SNAPSHOT}


def snapshots_config(
    accounting: str = "full", ready_after: str = "0s", clones: bool = True
) -> dict[str, Any]:
    """The `controller` section that turns snapshots (and clones) on."""
    return {"snapshots": {"accounting": accounting, "ready_after": ready_after}, "clones": clones}


async def controller_rpcs(csi: RunningDriver) -> set[int]:
    response = await csi.controller.ControllerGetCapabilities(pb.ControllerGetCapabilitiesRequest())
    return {c.rpc.type for c in response.capabilities}


async def snapshot(
    csi: RunningDriver, name: str, source: str, parameters: Mapping[str, str] | None = None
) -> pb.Snapshot:
    response = await csi.controller.CreateSnapshot(
        pb.CreateSnapshotRequest(
            name=name, source_volume_id=source, parameters=dict(parameters or {})
        )
    )
    return response.snapshot


async def delete_snapshot(csi: RunningDriver, snapshot_id: str) -> None:
    await csi.controller.DeleteSnapshot(pb.DeleteSnapshotRequest(snapshot_id=snapshot_id))


async def list_snapshots(csi: RunningDriver, **fields: Any) -> pb.ListSnapshotsResponse:
    return await csi.controller.ListSnapshots(pb.ListSnapshotsRequest(**fields))


def from_snapshot(
    name: str, snapshot_id: str, required: int = 0, **kw: Any
) -> pb.CreateVolumeRequest:
    request = create_request(name, required, **kw)
    request.volume_content_source.snapshot.snapshot_id = snapshot_id
    return request


def from_volume(name: str, volume_id: str, required: int = 0, **kw: Any) -> pb.CreateVolumeRequest:
    request = create_request(name, required, **kw)
    request.volume_content_source.volume.volume_id = volume_id
    return request


def data_of(csi: RunningDriver, volume_id: str) -> Path:
    """A volume's backing directory or file, where a test writes what a workload would."""
    return csi.config.volumes_dir / volume_id


def snapshot_data(csi: RunningDriver, snapshot_id: str) -> Path:
    return csi.config.snapshots_dir / snapshot_id


class HeldCopy:
    """A copy_data that waits in its worker thread until the test lets it go on."""

    def __init__(self, real: Callable[..., None]) -> None:
        self._real = real
        self._go = threading.Event()
        self._started = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self._started.set()
        if not self._go.wait(timeout=30):
            raise TimeoutError("the test never let the copy go on")
        self._real(*args, **kwargs)

    async def started(self) -> None:
        """Wait until a copy runs (its operation holds its names and sources by then)."""
        if not await asyncio.to_thread(self._started.wait, 10):
            raise AssertionError("no copy started within 10 s")

    def release(self) -> None:
        self._go.set()


@contextmanager
def copies_held(monkeypatch: pytest.MonkeyPatch, module: Any) -> Iterator[HeldCopy]:
    """Make `module`'s copy_data wait until `release()`; the copy then runs for real.
    Released at the end in any case, so no worker thread outlives the test."""
    held = HeldCopy(module.copy_data)
    monkeypatch.setattr(module, "copy_data", held)
    try:
        yield held
    finally:
        held.release()
