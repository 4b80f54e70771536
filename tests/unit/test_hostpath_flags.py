"""hostpathplugin's flags mean in csi-mock what they mean in csi-driver-host-path,
including how they affect each other (docs/hostpath-flags.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from csi_mock import __version__
from csi_mock.cli import build_parser
from csi_mock.config import ConfigError, DriverConfig
from csi_mock.driver import Driver
from csi_mock.hostpath_flags import resolve_config
from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from csi_mock.server import DriverServer

GiB = 1 << 30
TiB = 1 << 40
NODE_KEY = "topology.csi-mock.example/node"
RPC = pb.ControllerServiceCapability.RPC.Type
Service = pb.PluginCapability.Service.Type


def resolve(*argv: str, env: dict[str, str] | None = None) -> DriverConfig:
    return resolve_config(build_parser().parse_args(["serve", *argv]), env or {})


@dataclass
class Served:
    """The driver's config and its stubs (typed Any: the generated stubs are typed as
    synchronous, but on a grpc.aio channel every call is awaited)."""

    config: DriverConfig
    identity: Any
    controller: Any
    node: Any


Serve = Callable[..., Awaitable[Served]]


@pytest.fixture
async def serve(short_tmp_path: Path) -> AsyncIterator[Serve]:
    """`await serve(*flags)`: csi-mock configured by those flags, served in-process."""
    running: list[tuple[DriverServer, grpc.aio.Channel]] = []

    async def start(*argv: str) -> Served:
        config = resolve(
            f"--endpoint=unix://{short_tmp_path}/csi.sock",
            f"--statedir={short_tmp_path}/state",
            *argv,
        )
        server = DriverServer(Driver.open(config))
        await server.start()
        channel = grpc.aio.insecure_channel(f"unix://{config.socket_path}")
        running.append((server, channel))
        return Served(
            config,
            pb_grpc.IdentityStub(channel),
            pb_grpc.ControllerStub(channel),
            pb_grpc.NodeStub(channel),
        )

    yield start
    for server, channel in running:
        await channel.close(grace=None)
        await server.stop(grace=1)


def create_request(name: str, size: int, kind: str | None = None) -> pb.CreateVolumeRequest:
    return pb.CreateVolumeRequest(
        name=name,
        capacity_range=pb.CapacityRange(required_bytes=size),
        volume_capabilities=[
            pb.VolumeCapability(
                mount=pb.VolumeCapability.MountVolume(),
                access_mode=pb.VolumeCapability.AccessMode(
                    mode=pb.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
                ),
            )
        ],
        parameters={"kind": kind} if kind else {},
    )


async def capacity(served: Served, kind: str | None = None) -> pb.GetCapacityResponse:
    response: pb.GetCapacityResponse = await served.controller.GetCapacity(
        pb.GetCapacityRequest(parameters={"kind": kind} if kind else {})
    )
    return response


# -- --attach-limit and --maxvolumespernode -------------------------------------------


async def test_attach_limit_replaces_maxvolumespernode_in_node_get_info(serve: Serve) -> None:
    served = await serve("--nodeid=n1", "--maxvolumespernode=7", "--attach-limit=3")
    info = await served.node.NodeGetInfo(pb.NodeGetInfoRequest())
    assert info.max_volumes_per_node == 3
    assert served.config.controller.attach_limit == 3


async def test_maxvolumespernode_alone_feeds_node_get_info(serve: Serve) -> None:
    served = await serve("--nodeid=n1", "--maxvolumespernode=7")
    info = await served.node.NodeGetInfo(pb.NodeGetInfoRequest())
    assert info.max_volumes_per_node == 7
    assert served.config.controller.attach_limit == 0


def test_negative_attach_limit_is_refused_naming_the_flag_as_maxvolumespernode_is() -> None:
    with pytest.raises(ConfigError, match=r"^--attach-limit: -3 is negative; give 0 \(no limit\)"):
        resolve("--nodeid=n1", "--attach-limit=-3")


def test_random_attach_limit_minus_one_is_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"^--attach-limit: -1 .* not supported"):
        resolve("--nodeid=n1", "--attach-limit=-1")


def test_negative_maxvolumespernode_is_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"^--maxvolumespernode: -2 is negative"):
        resolve("--nodeid=n1", "--maxvolumespernode=-2")


async def test_attach_limit_counts_this_nodes_attachments(serve: Serve) -> None:
    served = await serve("--nodeid=n1", "--enable-attach", "--attach-limit=1")
    ids = [
        (await served.controller.CreateVolume(create_request(f"v{i}", GiB))).volume.volume_id
        for i in range(2)
    ]
    capability = create_request("x", 0).volume_capabilities[0]
    await served.controller.ControllerPublishVolume(
        pb.ControllerPublishVolumeRequest(
            volume_id=ids[0], node_id="n1", volume_capability=capability
        )
    )
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await served.controller.ControllerPublishVolume(
            pb.ControllerPublishVolumeRequest(
                volume_id=ids[1], node_id="n1", volume_capability=capability
            )
        )
    assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED


# -- --enable-attach ----------------------------------------------------------------------


async def test_enable_attach_adds_publish_unpublish_to_the_controller_capabilities(
    serve: Serve,
) -> None:
    served = await serve("--nodeid=n1", "--enable-attach")
    response = await served.controller.ControllerGetCapabilities(
        pb.ControllerGetCapabilitiesRequest()
    )
    assert RPC.PUBLISH_UNPUBLISH_VOLUME in {c.rpc.type for c in response.capabilities}


async def test_without_enable_attach_publish_is_not_advertised(serve: Serve) -> None:
    served = await serve("--nodeid=n1")
    response = await served.controller.ControllerGetCapabilities(
        pb.ControllerGetCapabilitiesRequest()
    )
    assert RPC.PUBLISH_UNPUBLISH_VOLUME not in {c.rpc.type for c in response.capabilities}


# -- --capacity, --nodeid and --enable-topology --------------------------------------------


async def test_capacity_pools_live_in_the_node_segment_node_get_info_reports(
    serve: Serve,
) -> None:
    served = await serve("--nodeid=n1", "--capacity=fast=10Gi")
    info = await served.node.NodeGetInfo(pb.NodeGetInfoRequest())
    assert dict(info.accessible_topology.segments) == {NODE_KEY: "n1"}
    volume = (await served.controller.CreateVolume(create_request("v", GiB, "fast"))).volume
    assert [dict(t.segments) for t in volume.accessible_topology] == [{NODE_KEY: "n1"}]
    here = await served.controller.GetCapacity(
        pb.GetCapacityRequest(
            parameters={"kind": "fast"}, accessible_topology=pb.Topology(segments={NODE_KEY: "n1"})
        )
    )
    assert here.available_capacity == 9 * GiB


async def test_enable_topology_false_drops_the_segment_from_node_pools_and_volumes(
    serve: Serve,
) -> None:
    served = await serve("--nodeid=n1", "--capacity=fast=10Gi", "--enable-topology=false")
    assert served.config.pools[0].segment == {}
    info = await served.node.NodeGetInfo(pb.NodeGetInfoRequest())
    assert not info.HasField("accessible_topology")
    volume = (await served.controller.CreateVolume(create_request("v", GiB, "fast"))).volume
    assert list(volume.accessible_topology) == []
    plugin = await served.identity.GetPluginCapabilities(pb.GetPluginCapabilitiesRequest())
    services = {c.service.type for c in plugin.capabilities if c.HasField("service")}
    assert Service.VOLUME_ACCESSIBILITY_CONSTRAINTS not in services


def test_a_repeated_capacity_kind_keeps_the_last_quantity() -> None:
    config = resolve("--nodeid=n1", "--capacity=fast=1Gi", "--capacity=fast=5Gi")
    assert [(p.name, p.size) for p in config.pools] == [("fast", 5 * GiB)]


# -- --max-volume-size with and without --capacity -----------------------------------------


async def test_capacity_pools_take_hostpaths_default_max_volume_size_of_1ti(
    serve: Serve,
) -> None:
    served = await serve("--nodeid=n1", "--capacity=fast=10Ti")
    report = await capacity(served, "fast")
    assert (report.available_capacity, report.maximum_volume_size.value) == (10 * TiB, TiB)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await served.controller.CreateVolume(create_request("big", 2 * TiB, "fast"))
    assert refused.value.code() is grpc.StatusCode.OUT_OF_RANGE


async def test_max_volume_size_with_capacity_is_get_capacitys_maximum(serve: Serve) -> None:
    served = await serve("--nodeid=n1", "--capacity=fast=10Gi", "--max-volume-size=4Gi")
    report = await capacity(served, "fast")
    assert report.maximum_volume_size.value == 4 * GiB
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await served.controller.CreateVolume(create_request("big", 5 * GiB, "fast"))
    assert refused.value.code() is grpc.StatusCode.OUT_OF_RANGE


async def test_max_volume_size_without_capacity_caps_and_fits_the_default_pool(
    serve: Serve,
) -> None:
    served = await serve("--nodeid=n1", "--max-volume-size=2199023255552")  # 2Ti
    report = await capacity(served)
    assert report.maximum_volume_size.value == 2 * TiB
    await served.controller.CreateVolume(create_request("two-ti", 2 * TiB))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await served.controller.CreateVolume(create_request("three-ti", 3 * TiB))
    assert refused.value.code() is grpc.StatusCode.OUT_OF_RANGE


async def test_without_flags_or_config_volumes_above_1ti_are_out_of_range(serve: Serve) -> None:
    served = await serve("--nodeid=n1")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await served.controller.CreateVolume(create_request("big", TiB + 1))
    assert refused.value.code() is grpc.StatusCode.OUT_OF_RANGE


def test_max_volume_size_caps_config_file_pools_without_their_own(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "node: {id: n1}\npools:\n- {name: a, size: 10Gi}\n"
        "- {name: b, size: 10Gi, max_volume_size: 1Gi}\n"
    )
    config = resolve(f"--config={path}", "--max-volume-size=2Gi")
    assert [p.max_volume_size for p in config.pools] == [2 * GiB, GiB]


def test_max_volume_size_parses_go_int64_bytes_and_quantities() -> None:
    sizes = [
        resolve("--nodeid=n1", f"--max-volume-size={v}").pools[0].max_volume_size
        for v in ("1073741824", "0x40000000", "010", "1Gi")
    ]
    assert sizes == [GiB, GiB, 8, GiB]


def test_negative_max_volume_size_is_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"^--max-volume-size: '-1' is negative"):
        resolve("--nodeid=n1", "--max-volume-size=-1")


# -- Go flag syntax ----------------------------------------------------------------------------


def test_a_bool_flag_with_a_separate_value_is_refused_naming_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        resolve("--nodeid=n1", "--enable-attach", "false")
    assert "--enable-attach false: a boolean flag takes its value after '='" in (
        capsys.readouterr().err
    )


def test_bool_flags_take_go_spellings_only() -> None:
    assert resolve("--nodeid=n1", "-enable-attach=T").attach_required is True
    assert resolve("--nodeid=n1", "-enable-topology=f").topology is False
    assert resolve("--nodeid=n1", "-enable-attach").attach_required is True
    with pytest.raises(ConfigError, match=r"^--enable-attach: 'yes' is not a boolean"):
        resolve("--nodeid=n1", "--enable-attach=yes")


def test_integer_flags_parse_as_go_int64() -> None:
    config = resolve("--nodeid=n1", "--maxvolumespernode=010", "--attach-limit=0x0")
    assert config.node.max_volumes_per_node == 8
    with pytest.raises(ConfigError, match=r"^--maxvolumespernode: '1k' is not an integer"):
        resolve("--nodeid=n1", "--maxvolumespernode=1k")


def test_flag_abbreviations_are_refused_as_go_refuses_them() -> None:
    with pytest.raises(SystemExit):
        resolve("--nodeid=n1", "--max-volume=1Gi")


def test_v_selects_debug_from_5_and_refuses_non_integers() -> None:
    assert resolve("--nodeid=n1", "-v=5").log_level == "debug"
    assert resolve("--nodeid=n1", "--v=4").log_level == "info"
    with pytest.raises(ConfigError, match=r"^--v: 'high' is not a klog verbosity"):
        resolve("--nodeid=n1", "-v=high")


def test_version_flag_of_serve_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        resolve("-version")
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"csi-mock {__version__}"


# -- --endpoint and --drivername ---------------------------------------------------------------


def test_a_tcp_endpoint_is_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"^--endpoint: must be unix:///absolute/path\.sock"):
        resolve("--nodeid=n1", "--endpoint=tcp://127.0.0.1:10000")


def test_an_invalid_drivername_is_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"  name: .*'Not_DNS'\) \[--drivername\]"):
        resolve("--nodeid=n1", "--drivername=Not_DNS")


# -- --enable-controller-modify-volume and --accepted-mutable-parameter-names ----------------


async def modify(served: Served, volume_id: str, **mutable: str) -> None:
    await served.controller.ControllerModifyVolume(
        pb.ControllerModifyVolumeRequest(volume_id=volume_id, mutable_parameters=mutable)
    )


async def controller_rpcs(served: Served) -> set[int]:
    response = await served.controller.ControllerGetCapabilities(
        pb.ControllerGetCapabilitiesRequest()
    )
    return {c.rpc.type for c in response.capabilities}


async def test_enable_controller_modify_volume_alone_accepts_any_mutable_parameter(
    serve: Serve,
) -> None:
    served = await serve("--nodeid=n1", "--enable-controller-modify-volume")
    request = create_request("v", GiB)
    request.mutable_parameters["anything"] = "1"
    volume = (await served.controller.CreateVolume(request)).volume

    await modify(served, volume.volume_id, XXX_FakeKey="XXX_FakeValue")

    assert RPC.MODIFY_VOLUME in await controller_rpcs(served)


async def test_without_enable_controller_modify_volume_modify_is_not_advertised(
    serve: Serve,
) -> None:
    served = await serve("--nodeid=n1")
    assert RPC.MODIFY_VOLUME not in await controller_rpcs(served)


async def test_accepted_mutable_parameter_names_allow_those_names_with_any_value(
    serve: Serve,
) -> None:
    served = await serve(
        "--nodeid=n1",
        "--enable-controller-modify-volume",
        "--accepted-mutable-parameter-names=iops,tier",
    )
    volume = (await served.controller.CreateVolume(create_request("v", GiB))).volume

    await modify(served, volume.volume_id, tier="whatever", iops="3")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await modify(served, volume.volume_id, XXX_FakeKey="XXX_FakeValue")
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "'XXX_FakeKey'" in (refused.value.details() or "")


def test_accepted_mutable_parameter_names_without_enable_do_nothing() -> None:
    config = resolve("--nodeid=n1", "--accepted-mutable-parameter-names=iops")
    assert config.controller.modify is None


def test_accepted_mutable_parameter_names_split_at_commas_trimmed_and_repeatable() -> None:
    config = resolve(
        "--nodeid=n1",
        "--enable-controller-modify-volume=true",
        "--accepted-mutable-parameter-names=iops, tier",
        "-accepted-mutable-parameter-names=throughput",
    )
    assert config.controller.modify is not None
    assert config.controller.modify.mutable_parameters == {
        "iops": [],
        "tier": [],
        "throughput": [],
    }


def test_an_empty_mutable_parameter_name_is_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"^--accepted-mutable-parameter-names: 'a,,b' has"):
        resolve(
            "--nodeid=n1",
            "--enable-controller-modify-volume",
            "--accepted-mutable-parameter-names=a,,b",
        )


def modify_config(tmp_path: Path) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(
        "node: {id: n1}\ncontroller:\n  modify:\n    mutable_parameters: {tier: [gold]}\n"
    )
    return path


def test_enable_controller_modify_volume_keeps_the_config_files_mutable_parameters(
    tmp_path: Path,
) -> None:
    config = resolve(f"--config={modify_config(tmp_path)}", "--enable-controller-modify-volume")
    assert config.controller.modify is not None
    assert config.controller.modify.mutable_parameters == {"tier": ["gold"]}


def test_accepted_mutable_parameter_names_replace_the_config_files(tmp_path: Path) -> None:
    config = resolve(
        f"--config={modify_config(tmp_path)}",
        "--enable-controller-modify-volume",
        "--accepted-mutable-parameter-names=iops",
    )
    assert config.controller.modify is not None
    assert config.controller.modify.mutable_parameters == {"iops": []}


def test_enable_controller_modify_volume_false_turns_the_config_files_modify_off(
    tmp_path: Path,
) -> None:
    config = resolve(
        f"--config={modify_config(tmp_path)}", "--enable-controller-modify-volume=false"
    )
    assert config.controller.modify is None


# -- --enable-list-snapshots ------------------------------------------------------------

SNAPSHOT_RPCS = {RPC.CREATE_DELETE_SNAPSHOT, RPC.LIST_SNAPSHOTS, RPC.GET_SNAPSHOT}


async def test_enable_list_snapshots_offers_snapshots_with_listing(serve: Serve) -> None:
    served = await serve("--nodeid=n1", "--enable-list-snapshots")
    volume = (await served.controller.CreateVolume(create_request("v", GiB))).volume

    await served.controller.CreateSnapshot(
        pb.CreateSnapshotRequest(name="s", source_volume_id=volume.volume_id)
    )

    listed = await served.controller.ListSnapshots(pb.ListSnapshotsRequest())
    assert [e.snapshot.source_volume_id for e in listed.entries] == [volume.volume_id]
    assert await controller_rpcs(served) >= SNAPSHOT_RPCS


async def test_without_enable_list_snapshots_snapshots_are_not_advertised(serve: Serve) -> None:
    served = await serve("--nodeid=n1")
    assert not SNAPSHOT_RPCS & await controller_rpcs(served)


def test_enable_list_snapshots_keeps_the_config_files_snapshot_settings(tmp_path: Path) -> None:
    path = tmp_path / "driver.yaml"
    path.write_text("node: {id: n1}\ncontroller:\n  snapshots: {accounting: used}\n")
    config = resolve(f"--config={path}", "--enable-list-snapshots=true")
    assert config.controller.snapshots is not None
    assert config.controller.snapshots.accounting.value == "used"


def test_enable_list_snapshots_false_is_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match="--enable-list-snapshots=false: csi-mock does not"):
        resolve("--nodeid=n1", "--enable-list-snapshots=false")


# -- expansion flags ----------------------------------------------------------------------

NodeRPC = pb.NodeServiceCapability.RPC.Type
Expansion = pb.PluginCapability.VolumeExpansion


async def expansion_capabilities(served: Served) -> tuple[bool, bool, list[int]]:
    """(controller EXPAND_VOLUME, node EXPAND_VOLUME, the plugin's VolumeExpansion types)."""
    controller = await served.controller.ControllerGetCapabilities(
        pb.ControllerGetCapabilitiesRequest()
    )
    node = await served.node.NodeGetCapabilities(pb.NodeGetCapabilitiesRequest())
    plugin = await served.identity.GetPluginCapabilities(pb.GetPluginCapabilitiesRequest())
    return (
        RPC.EXPAND_VOLUME in {c.rpc.type for c in controller.capabilities},
        NodeRPC.EXPAND_VOLUME in {c.rpc.type for c in node.capabilities},
        [c.volume_expansion.type for c in plugin.capabilities if c.HasField("volume_expansion")],
    )


async def test_disable_controller_expansion_leaves_node_only_expansion(serve: Serve) -> None:
    served = await serve("--nodeid=n1", "--disable-controller-expansion")

    assert await expansion_capabilities(served) == (False, True, [Expansion.ONLINE])


async def test_disable_node_expansion_leaves_controller_only_expansion(serve: Serve) -> None:
    served = await serve("--nodeid=n1", "--disable-node-expansion")

    assert await expansion_capabilities(served) == (True, False, [Expansion.ONLINE])


async def test_enable_volume_expansion_false_turns_both_sides_off(serve: Serve) -> None:
    served = await serve("--nodeid=n1", "--enable-volume-expansion=false")

    assert await expansion_capabilities(served) == (False, False, [])


async def test_node_expand_required_false_is_controller_expands_reply(serve: Serve) -> None:
    served = await serve("--nodeid=n1", "--node-expand-required=false")
    volume = (await served.controller.CreateVolume(create_request("pvc-1", GiB))).volume

    reply = await served.controller.ControllerExpandVolume(
        pb.ControllerExpandVolumeRequest(
            volume_id=volume.volume_id, capacity_range=pb.CapacityRange(required_bytes=2 * GiB)
        )
    )

    assert reply.node_expansion_required is False


def test_max_volume_size_node_parses_go_int64_bytes_and_quantities() -> None:
    assert (
        resolve("--nodeid=n1", "--max-volume-size-node=0x40000000").node.max_expansion_size == GiB
    )
    assert resolve("--nodeid=n1", "--max-volume-size-node=2Gi").node.max_expansion_size == 2 * GiB


def test_negative_max_volume_size_node_is_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match="--max-volume-size-node"):
        resolve("--nodeid=n1", "--max-volume-size-node=-1")


def test_expansion_flags_keep_the_config_files_values_when_absent(tmp_path: Path) -> None:
    config_file = tmp_path / "csi-mock.yaml"
    config_file.write_text("controller: {expansion: false, node_expansion_required: false}\n")

    config = resolve("--nodeid=n1", f"--config={config_file}")

    assert (config.controller.expansion, config.node_expansion) == (False, False)
    assert config.controller.node_expansion_required is False
