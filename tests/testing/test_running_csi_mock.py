"""csi_mock.testing.running_csi_mock: a real driver for a unit test, no cluster."""

from __future__ import annotations

import textwrap
from pathlib import Path

import grpc
import pytest

import csi_mock.testing
from csi_mock.admin.client import AdminError
from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from csi_mock.testing import CsiMockStartError, merge_config, running_csi_mock

GI = 1 << 30
MOUNT = pb.VolumeCapability(
    mount=pb.VolumeCapability.MountVolume(),
    access_mode=pb.VolumeCapability.AccessMode(
        mode=pb.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
    ),
)


def create(controller: pb_grpc.ControllerStub, name: str, size: int) -> pb.Volume:
    request = pb.CreateVolumeRequest(
        name=name, capacity_range=pb.CapacityRange(required_bytes=size), volume_capabilities=[MOUNT]
    )
    return controller.CreateVolume(request, timeout=10).volume


def test_the_default_driver_serves_controller_and_node_on_one_socket() -> None:
    with running_csi_mock() as mock:
        channel = mock.channel()
        assert pb_grpc.IdentityStub(channel).Probe(pb.ProbeRequest()).ready.value
        info = pb_grpc.NodeStub(channel).NodeGetInfo(pb.NodeGetInfoRequest())
        assert info.node_id == "node-1"
        volume = create(pb_grpc.ControllerStub(channel), "v1", GI)
        assert volume.capacity_bytes == GI
        assert [p.name for p in mock.admin.pools()] == ["default"]
        socket_path = mock.socket_path
    assert not socket_path.parent.exists(), "the temporary directory is removed"


def test_configuration_is_merged_over_the_defaults() -> None:
    config = {"pools": [{"name": "small", "size": "1Gi"}], "node": {"max_volumes_per_node": 3}}
    with running_csi_mock(config) as mock:
        channel = mock.channel()
        info = pb_grpc.NodeStub(channel).NodeGetInfo(pb.NodeGetInfoRequest())
        assert (info.node_id, info.max_volumes_per_node) == ("node-1", 3)
        with pytest.raises(grpc.RpcError) as refused:
            create(pb_grpc.ControllerStub(channel), "too-big", 2 * GI)
        assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED


def test_faults_and_the_journal_reach_the_code_under_test() -> None:
    with running_csi_mock() as mock:
        controller = pb_grpc.ControllerStub(mock.channel())
        mock.admin.add_fault("CreateVolume", code="UNAVAILABLE", times=1)
        with pytest.raises(grpc.RpcError) as failed:
            create(controller, "v1", GI)
        assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
        create(controller, "v1", GI)
        codes = [record.code for record in mock.admin.journal(method="CreateVolume")]
        assert codes == ["UNAVAILABLE", "OK"]


def test_a_bad_configuration_fails_with_the_drivers_message_naming_the_key() -> None:
    with pytest.raises(CsiMockStartError) as failed, running_csi_mock({"pools": [{"size": "1Gi"}]}):
        pass
    assert "pools.0.name" in str(failed.value)


def test_a_given_directory_is_kept_with_the_drivers_log(tmp_path: Path) -> None:
    directory = tmp_path / "driver"
    with running_csi_mock(directory=directory) as mock:
        assert mock.endpoint == f"unix://{directory / 'csi.sock'}"
    assert (directory / "csi-mock.log").exists()
    assert (directory / "state").is_dir()


def test_state_survives_a_kill_and_restart() -> None:
    with running_csi_mock() as mock:
        volume = create(pb_grpc.ControllerStub(mock.channel()), "v1", GI)
        mock.kill()
        with pytest.raises(RuntimeError):
            mock.admin.pools()
        mock.start()
        listed = pb_grpc.ControllerStub(mock.channel()).ListVolumes(pb.ListVolumesRequest())
        assert [entry.volume.volume_id for entry in listed.entries] == [volume.volume_id]


def test_the_admin_client_refuses_bad_input_with_the_field() -> None:
    with running_csi_mock() as mock, pytest.raises(AdminError) as refused:
        mock.admin.add_fault("NoSuchMethod", code="INTERNAL")
    assert refused.value.status == 400


def test_merge_config_merges_mappings_and_replaces_everything_else() -> None:
    base = {"node": {"id": "a", "mount": "directory"}, "pools": [{"name": "p"}]}
    merged = merge_config(base, {"node": {"id": "b"}, "pools": [{"name": "q"}]})
    assert merged == {"node": {"id": "b", "mount": "directory"}, "pools": [{"name": "q"}]}
    assert base["node"] == {"id": "a", "mount": "directory"}, "inputs are not changed"


def docstring_example(docstring: str) -> str:
    """The literal block that follows the first ``::`` of a docstring, dedented."""
    _, _, rest = docstring.partition("::\n\n")
    lines = []
    for line in rest.splitlines():
        if line and not line.startswith(" "):
            break
        lines.append(line)
    return textwrap.dedent("\n".join(lines))


def test_the_modules_example_runs_as_printed() -> None:
    example = docstring_example(csi_mock.testing.__doc__ or "")
    assert "running_csi_mock(" in example
    exec(compile(example, "csi_mock/testing.py (docstring)", "exec"), {})
