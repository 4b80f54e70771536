"""Parallel identical requests must behave like one."""

import asyncio

import grpc

from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver

GI = 2**30
NODE_KEY = "topology.csi-mock.example/node"


def mount_capability() -> pb.VolumeCapability:
    return pb.VolumeCapability(
        mount=pb.VolumeCapability.MountVolume(),
        access_mode=pb.VolumeCapability.AccessMode(
            mode=pb.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
        ),
    )


async def test_64_parallel_identical_creates_make_one_volume_and_deduct_once(
    csi: RunningDriver,
) -> None:
    request = pb.CreateVolumeRequest(
        name="pvc-same",
        capacity_range=pb.CapacityRange(required_bytes=GI),
        volume_capabilities=[mount_capability()],
        accessibility_requirements=pb.TopologyRequirement(
            requisite=[pb.Topology(segments={NODE_KEY: "node-1"})]
        ),
    )
    responses = await asyncio.gather(*(csi.controller.CreateVolume(request) for _ in range(64)))

    assert len({r.volume.volume_id for r in responses}) == 1
    listed = await csi.controller.ListVolumes(pb.ListVolumesRequest())
    assert len(listed.entries) == 1
    capacity = await csi.controller.GetCapacity(
        pb.GetCapacityRequest(accessible_topology=pb.Topology(segments={NODE_KEY: "node-1"}))
    )
    assert capacity.available_capacity == 10 * GI - GI


async def test_parallel_creates_of_different_volumes_never_overcommit_a_pool(
    csi: RunningDriver,
) -> None:
    topology = pb.TopologyRequirement(requisite=[pb.Topology(segments={NODE_KEY: "node-1"})])

    async def create(index: int) -> bool:
        """True when created, False when refused for want of room; anything else fails."""
        try:
            await csi.controller.CreateVolume(
                pb.CreateVolumeRequest(
                    name=f"pvc-{index}",
                    capacity_range=pb.CapacityRange(required_bytes=3 * GI),
                    volume_capabilities=[mount_capability()],
                    accessibility_requirements=topology,
                )
            )
        except grpc.aio.AioRpcError as error:
            if error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED:
                return False
            raise  # INTERNAL, UNKNOWN, ABORTED...: a race, not a full pool
        return True

    created = await asyncio.gather(*(create(i) for i in range(16)))
    assert sum(created) == 3  # 10Gi pool holds three 3Gi volumes
    capacity = await csi.controller.GetCapacity(
        pb.GetCapacityRequest(accessible_topology=pb.Topology(segments={NODE_KEY: "node-1"}))
    )
    assert capacity.available_capacity == GI
