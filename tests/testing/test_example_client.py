"""The example of docs/testing.md, run: testing your own CSI client code against csi-mock.

``provision`` stands for the code under test (a provisioner's retry loop); csi-mock
plays the storage backend, made to fail on purpose through its admin API.
"""

from __future__ import annotations

import time

import grpc
import pytest

from csi_mock.proto import csi_pb2, csi_pb2_grpc
from csi_mock.testing import RunningCsiMock

RETRIED = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


def provision(channel: grpc.Channel, name: str, size: int, attempts: int = 3) -> str:
    """Create a volume, retrying transient failures; return its ID."""
    controller = csi_pb2_grpc.ControllerStub(channel)
    request = csi_pb2.CreateVolumeRequest(
        name=name,
        capacity_range=csi_pb2.CapacityRange(required_bytes=size),
        volume_capabilities=[
            csi_pb2.VolumeCapability(
                mount=csi_pb2.VolumeCapability.MountVolume(),
                access_mode=csi_pb2.VolumeCapability.AccessMode(mode=1),
            )
        ],
    )
    for attempt in range(1, attempts + 1):
        try:
            return controller.CreateVolume(request, timeout=5).volume.volume_id
        except grpc.RpcError as error:
            if error.code() not in RETRIED or attempt == attempts:
                raise
            time.sleep(0.05 * attempt)
    raise AssertionError("unreachable")


def test_transient_failures_are_retried(csi_mock: RunningCsiMock) -> None:
    csi_mock.admin.add_fault("CreateVolume", code="UNAVAILABLE", times=2)

    volume_id = provision(csi_mock.channel(), "data", 1 << 30)

    calls = csi_mock.admin.journal(method="CreateVolume")
    assert [call.code for call in calls] == ["UNAVAILABLE", "UNAVAILABLE", "OK"]
    assert volume_id.startswith("vol-")


@pytest.mark.csi_mock_config({"pools": [{"name": "small", "size": "1Gi"}]})
def test_a_full_backend_is_not_retried(csi_mock: RunningCsiMock) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        provision(csi_mock.channel(), "data", 2 << 30)

    assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert len(csi_mock.admin.journal(method="CreateVolume")) == 1
