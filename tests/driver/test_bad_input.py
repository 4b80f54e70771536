"""Malformed requests are refused with the right code, and refusing them changes nothing.

Every case runs against a driver holding one volume that is staged and published, and
checks afterwards that ListVolumes, GetCapacity, the node's view of that volume and the
files below tmp_path are exactly as they were before the refused call.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import (
    SINGLE_NODE_WRITER,
    GiB,
    assert_status,
    controller_state,
    create_request,
    create_volume,
    mount_capability,
    publish,
    stage,
    stats,
    unstage,
)

INVALID = grpc.StatusCode.INVALID_ARGUMENT
OUT_OF_RANGE = grpc.StatusCode.OUT_OF_RANGE


@dataclass(frozen=True)
class Base:
    """The volume every case runs next to: created, staged and published."""

    volume_id: str
    root: Path

    @property
    def staging(self) -> Path:
        return self.root / "staging"

    @property
    def target(self) -> Path:
        return self.root / "target"


Call = Callable[[RunningDriver, Base], Awaitable[Any]]


@pytest.fixture
async def base(csi: RunningDriver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Base:
    # Relative paths resolve below tmp_path, so anything created by mistake is seen.
    monkeypatch.chdir(tmp_path)
    volume = await create_volume(csi, "pvc-base", GiB, requisite=["node-1"])
    base = Base(volume.volume_id, tmp_path)
    await stage(csi, base.volume_id, base.staging)
    await publish(csi, base.volume_id, base.target, base.staging)
    return base


async def observable_state(csi: RunningDriver, base: Base) -> tuple[Any, ...]:
    node_view = []
    for path in (base.target, base.staging):
        try:
            await stats(csi, base.volume_id, path)
            node_view.append("ok")
        except grpc.aio.AioRpcError as error:
            node_view.append(error.code().name)
    files = sorted(
        os.path.relpath(os.path.join(directory, name), base.root)
        for directory, dirs, names in os.walk(base.root)
        if not directory.startswith(str(base.root / "state"))
        for name in dirs + names
    )
    return (await controller_state(csi), tuple(node_view), tuple(files))


async def assert_refused_without_effect(
    csi: RunningDriver, base: Base, call: Call, code: grpc.StatusCode, *fragments: str
) -> None:
    before = await observable_state(csi, base)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call(csi, base)

    assert_status(raised, code, *fragments)
    assert await observable_state(csi, base) == before


# -- request builders --------------------------------------------------------------------


def create(**fields: Any) -> Call:
    def call(csi: RunningDriver, base: Base) -> Awaitable[Any]:
        request = create_request("pvc-new")
        for name, value in fields.items():
            if value is None:
                request.ClearField(name)
            elif name == "capacity_range":
                request.capacity_range.CopyFrom(value)
            elif name == "volume_capabilities":
                del request.volume_capabilities[:]
                request.volume_capabilities.extend(value)
            elif name == "parameters":
                request.parameters.update(value)
            else:
                setattr(request, name, value)
        return csi.controller.CreateVolume(request)

    return call


def capability_without(field: str) -> pb.VolumeCapability:
    capability = mount_capability()
    capability.ClearField(field)
    return capability


def node_stage(
    volume_id: str | None = None, path: str | None = None, capability: bool = True
) -> Call:
    def call(csi: RunningDriver, base: Base) -> Awaitable[Any]:
        request = pb.NodeStageVolumeRequest(
            volume_id=base.volume_id if volume_id is None else volume_id,
            staging_target_path=str(base.root / "staging-2") if path is None else path,
        )
        if capability:
            request.volume_capability.CopyFrom(mount_capability())
        return csi.node.NodeStageVolume(request)

    return call


def node_publish(
    volume_id: str | None = None,
    target: str | None = None,
    staging: str | None = None,
    capability: bool = True,
) -> Call:
    def call(csi: RunningDriver, base: Base) -> Awaitable[Any]:
        request = pb.NodePublishVolumeRequest(
            volume_id=base.volume_id if volume_id is None else volume_id,
            target_path=str(base.root / "target-2") if target is None else target,
            staging_target_path=str(base.staging) if staging is None else staging,
        )
        if capability:
            request.volume_capability.CopyFrom(mount_capability())
        return csi.node.NodePublishVolume(request)

    return call


def node_unpublish(volume_id: str | None = None, target: str | None = None) -> Call:
    def call(csi: RunningDriver, base: Base) -> Awaitable[Any]:
        return csi.node.NodeUnpublishVolume(
            pb.NodeUnpublishVolumeRequest(
                volume_id=base.volume_id if volume_id is None else volume_id,
                target_path=str(base.target) if target is None else target,
            )
        )

    return call


def node_unstage(volume_id: str | None = None, path: str | None = None) -> Call:
    def call(csi: RunningDriver, base: Base) -> Awaitable[Any]:
        return csi.node.NodeUnstageVolume(
            pb.NodeUnstageVolumeRequest(
                volume_id=base.volume_id if volume_id is None else volume_id,
                staging_target_path=str(base.staging) if path is None else path,
            )
        )

    return call


def node_stats(volume_id: str | None = None, path: str | None = None) -> Call:
    def call(csi: RunningDriver, base: Base) -> Awaitable[Any]:
        return csi.node.NodeGetVolumeStats(
            pb.NodeGetVolumeStatsRequest(
                volume_id=base.volume_id if volume_id is None else volume_id,
                volume_path=str(base.target) if path is None else path,
            )
        )

    return call


def node_expand(
    volume_id: str | None = None, path: str | None = None, required: int = 2 * GiB, limit: int = 0
) -> Call:
    def call(csi: RunningDriver, base: Base) -> Awaitable[Any]:
        return csi.node.NodeExpandVolume(
            pb.NodeExpandVolumeRequest(
                volume_id=base.volume_id if volume_id is None else volume_id,
                volume_path=str(base.staging) if path is None else path,
                capacity_range=pb.CapacityRange(required_bytes=required, limit_bytes=limit),
            )
        )

    return call


def controller_expand(
    volume_id: str | None = None, required: int = 2 * GiB, limit: int = 0, with_range: bool = True
) -> Call:
    def call(csi: RunningDriver, base: Base) -> Awaitable[Any]:
        request = pb.ControllerExpandVolumeRequest(
            volume_id=base.volume_id if volume_id is None else volume_id
        )
        if with_range:
            request.capacity_range.CopyFrom(
                pb.CapacityRange(required_bytes=required, limit_bytes=limit)
            )
        return csi.controller.ControllerExpandVolume(request)

    return call


def by_id(rpc: str, request_type: type[Any], **fields: Any) -> Call:
    def call(csi: RunningDriver, base: Base) -> Awaitable[Any]:
        return getattr(csi.controller, rpc)(request_type(**fields))

    return call


# -- missing required fields -------------------------------------------------------------

MISSING: dict[str, tuple[Call, str]] = {
    "CreateVolume.name": (create(name=""), "name"),
    "CreateVolume.volume_capabilities": (create(volume_capabilities=[]), "volume_capabilities"),
    "CreateVolume.access_type": (
        create(volume_capabilities=[capability_without("mount")]),
        "access_type",
    ),
    "CreateVolume.access_mode": (
        create(volume_capabilities=[capability_without("access_mode")]),
        "access_mode",
    ),
    "DeleteVolume.volume_id": (by_id("DeleteVolume", pb.DeleteVolumeRequest), "volume_id"),
    "ControllerGetVolume.volume_id": (
        by_id("ControllerGetVolume", pb.ControllerGetVolumeRequest),
        "volume_id",
    ),
    "ValidateVolumeCapabilities.volume_id": (
        by_id(
            "ValidateVolumeCapabilities",
            pb.ValidateVolumeCapabilitiesRequest,
            volume_capabilities=[mount_capability()],
        ),
        "volume_id",
    ),
    "ControllerExpandVolume.volume_id": (controller_expand(volume_id=""), "volume_id"),
    "ControllerExpandVolume.capacity_range": (
        controller_expand(with_range=False),
        "capacity_range",
    ),
    "NodeStageVolume.volume_id": (node_stage(volume_id=""), "volume_id"),
    "NodeStageVolume.staging_target_path": (node_stage(path=""), "staging_target_path"),
    "NodeStageVolume.volume_capability": (node_stage(capability=False), "volume_capability"),
    "NodePublishVolume.volume_id": (node_publish(volume_id=""), "volume_id"),
    "NodePublishVolume.target_path": (node_publish(target=""), "target_path"),
    "NodePublishVolume.volume_capability": (node_publish(capability=False), "volume_capability"),
    "NodeUnpublishVolume.volume_id": (node_unpublish(volume_id=""), "volume_id"),
    "NodeUnpublishVolume.target_path": (node_unpublish(target=""), "target_path"),
    "NodeUnstageVolume.volume_id": (node_unstage(volume_id=""), "volume_id"),
    "NodeUnstageVolume.staging_target_path": (node_unstage(path=""), "staging_target_path"),
    "NodeGetVolumeStats.volume_id": (node_stats(volume_id=""), "volume_id"),
    "NodeGetVolumeStats.volume_path": (node_stats(path=""), "volume_path"),
    "NodeExpandVolume.volume_id": (node_expand(volume_id=""), "volume_id"),
    "NodeExpandVolume.volume_path": (node_expand(path=""), "volume_path"),
}


@pytest.mark.parametrize("case", list(MISSING))
async def test_request_missing_a_required_field_is_invalid_argument_and_changes_nothing(
    csi: RunningDriver, base: Base, case: str
) -> None:
    call, field = MISSING[case]

    await assert_refused_without_effect(csi, base, call, INVALID, field)


# -- sizes ---------------------------------------------------------------------------------

NEGATIVE: dict[str, tuple[Call, str]] = {
    "CreateVolume.required_bytes": (
        create(capacity_range=pb.CapacityRange(required_bytes=-1)),
        "must not be negative",
    ),
    "CreateVolume.limit_bytes": (
        create(capacity_range=pb.CapacityRange(limit_bytes=-1)),
        "must not be negative",
    ),
    "ControllerExpandVolume.required_bytes": (controller_expand(required=-1), "required_bytes"),
    "ControllerExpandVolume.limit_bytes": (
        controller_expand(required=2 * GiB, limit=-1),
        "must not be negative",
    ),
    "NodeExpandVolume.required_bytes": (node_expand(required=-1), "must not be negative"),
    "NodeExpandVolume.limit_bytes": (node_expand(limit=-1), "must not be negative"),
    "ListVolumes.max_entries": (
        by_id("ListVolumes", pb.ListVolumesRequest, max_entries=-1),
        "max_entries",
    ),
}


@pytest.mark.parametrize("case", list(NEGATIVE))
async def test_negative_size_is_invalid_argument_and_changes_nothing(
    csi: RunningDriver, base: Base, case: str
) -> None:
    call, fragment = NEGATIVE[case]

    await assert_refused_without_effect(csi, base, call, INVALID, fragment)


ABOVE_LIMIT: dict[str, Call] = {
    "CreateVolume": create(
        capacity_range=pb.CapacityRange(required_bytes=2 * GiB, limit_bytes=GiB)
    ),
    "ControllerExpandVolume": controller_expand(required=3 * GiB, limit=2 * GiB),
    "NodeExpandVolume": node_expand(required=3 * GiB, limit=2 * GiB),
}


@pytest.mark.parametrize("case", list(ABOVE_LIMIT))
async def test_required_bytes_above_limit_bytes_is_out_of_range_and_changes_nothing(
    csi: RunningDriver, base: Base, case: str
) -> None:
    await assert_refused_without_effect(csi, base, ABOVE_LIMIT[case], OUT_OF_RANGE, "limit_bytes")


# -- paths -----------------------------------------------------------------------------------


def bad_path_case(rpc: str, kind: str) -> tuple[Call, str]:
    def call(csi: RunningDriver, base: Base) -> Awaitable[Any]:
        # Each bad path names the real staging or target path, so a lax driver would
        # act on the base volume and the state check would notice.
        real = base.staging if "staging" in rpc else base.target
        bad = {
            "relative": os.path.relpath(real, base.root),
            "dotdot": f"{real.parent}/x/../{real.name}",
            "nul": f"{real}\x00",
            # Found by tests/fuzz: these three failed with INTERNAL (ENAMETOOLONG, a
            # RecursionError in os.makedirs), or were accepted (the root directory).
            "long-name": f"{real.parent}/{'n' * 256}/{real.name}",
            "too-long": f"{real.parent}/{'d/' * 2100}{real.name}",
            "root": "/",
        }[kind]
        builders: dict[str, Call] = {
            "NodeStageVolume.staging_target_path": node_stage(path=bad),
            "NodePublishVolume.target_path": node_publish(target=bad),
            "NodePublishVolume.staging_target_path": node_publish(staging=bad),
            "NodeUnpublishVolume.target_path": node_unpublish(target=bad),
            "NodeUnstageVolume.staging_target_path": node_unstage(path=bad),
        }
        return builders[rpc](csi, base)

    return call, rpc.split(".")[1]


PATH_FIELDS = [
    "NodeStageVolume.staging_target_path",
    "NodePublishVolume.target_path",
    "NodePublishVolume.staging_target_path",
    "NodeUnpublishVolume.target_path",
    "NodeUnstageVolume.staging_target_path",
]


@pytest.mark.parametrize("kind", ["relative", "dotdot", "nul", "long-name", "too-long", "root"])
@pytest.mark.parametrize("rpc", PATH_FIELDS)
async def test_relative_dotdot_nul_over_long_or_root_path_is_invalid_argument_naming_the_field(
    csi: RunningDriver, base: Base, rpc: str, kind: str
) -> None:
    call, field = bad_path_case(rpc, kind)

    await assert_refused_without_effect(csi, base, call, INVALID, field)


@pytest.mark.parametrize(
    ("rpc", "field"),
    [
        ("NodeStageVolume", "staging_target_path"),
        ("NodePublishVolume", "target_path"),
    ],
)
async def test_path_below_a_file_is_failed_precondition_naming_the_field(
    csi: RunningDriver, base: Base, rpc: str, field: str
) -> None:
    # Found by tests/fuzz: NotADirectoryError from os.makedirs came back as INTERNAL.
    (base.root / "file").write_text("")
    volume = await create_volume(csi, "pvc-2", GiB, requisite=["node-1"])
    below = str(base.root / "file" / "x")
    call = node_stage(volume.volume_id, below) if rpc == "NodeStageVolume" else None
    if call is None:
        await stage(csi, volume.volume_id, base.root / "staging-2")
        call = node_publish(volume.volume_id, below, str(base.root / "staging-2"))
    before = await observable_state(csi, base)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call(csi, base)

    assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, field, "is not a directory")
    assert await observable_state(csi, base) == before


async def test_deep_path_within_path_max_is_created(csi: RunningDriver, base: Base) -> None:
    # os.makedirs recursed once per missing parent: a RecursionError (INTERNAL) here.
    volume = await create_volume(csi, "pvc-2", GiB, requisite=["node-1"])
    deep = base.root.joinpath(*["d"] * 1900)

    await stage(csi, volume.volume_id, deep)

    assert deep.is_dir()
    await unstage(csi, volume.volume_id, deep)
    # Removed here, bottom up: shutil.rmtree (pytest's clean-up) recurses as deep.
    for level in [deep, *deep.parents][:1900]:
        level.rmdir()


async def test_status_message_quoting_a_huge_field_is_cut_and_keeps_its_code(
    csi: RunningDriver,
) -> None:
    # Found by tests/fuzz: a message above 16 KiB made gRPC drop the status, and the
    # client saw RESOURCE_EXHAUSTED "Stream removed" instead of NOT_FOUND.
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerGetVolume(
            pb.ControllerGetVolumeRequest(volume_id="v" * 100_000)
        )

    assert_status(raised, grpc.StatusCode.NOT_FOUND, "volume 'vvv", "more characters")
    assert len((raised.value.details() or "").encode()) <= 1024


# -- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("n" * 254, id="254-characters"),
        pytest.param("é" * 254, id="254-two-byte-characters"),
        pytest.param(
            "n" * 129,
            id="129-bytes",
        ),
        pytest.param(
            "é" * 65,
            id="130-bytes-in-65-characters",
        ),
    ],
)
async def test_over_long_name_is_invalid_argument_and_changes_nothing(
    csi: RunningDriver, base: Base, name: str
) -> None:
    # Spec (Size Limits): a string field SHALL NOT exceed 128 bytes unless its
    # description says otherwise; CreateVolumeRequest.name does not.
    await assert_refused_without_effect(csi, base, create(name=name), INVALID, "name")


@pytest.mark.parametrize(
    "character",
    [
        pytest.param("\x00", id="U+0000"),
        pytest.param("\x08", id="U+0008"),
        pytest.param("\x0b", id="U+000B"),
        pytest.param("\x1f", id="U+001F"),
        pytest.param(
            "\x7f",
            id="U+007F",
        ),
        pytest.param(
            "\x85",
            id="U+0085",
        ),
    ],
)
async def test_name_with_a_banned_control_character_is_invalid_argument(
    csi: RunningDriver, base: Base, character: str
) -> None:
    # Spec (CreateVolumeRequest.name): banned are U+0000-U+0008, U+000B, U+000C,
    # U+000E-U+001F and U+007F-U+009F.
    await assert_refused_without_effect(csi, base, create(name=f"pvc{character}x"), INVALID, "name")


# -- bytes that are not a valid request --------------------------------------------------

MARK = "\u00e9\u00e9"
"""Four bytes in UTF-8 (C3 A9 C3 A9), replaced on the wire by four that are not UTF-8."""
NOT_UTF8 = b"\xff\xfe\xc3\x28"


def raw(method: str, request: Any, wire: Callable[[bytes], bytes] | None = None) -> Call:
    """`request` serialized, with every MARK replaced by bytes that are not UTF-8, sent as
    they are: a protobuf client refuses to build such a message itself."""

    def call(csi: RunningDriver, base: Base) -> Awaitable[Any]:
        data = request.SerializeToString()
        data = wire(data) if wire else data.replace(MARK.encode(), NOT_UTF8)
        send = csi.channel.unary_unary(method)
        return send(data)  # type: ignore[no-any-return]

    return call


def create_marked(**fields: Any) -> Any:
    request = create_request("pvc-new")
    for name, value in fields.items():
        if name == "parameters":
            request.parameters.update(value)
        elif name == "fs_type":
            request.volume_capabilities[0].mount.fs_type = value
        else:
            setattr(request, name, value)
    return request


CREATE = "/csi.v1.Controller/CreateVolume"


async def test_name_that_is_not_utf8_is_invalid_argument_naming_it(
    csi: RunningDriver, base: Base
) -> None:
    call = raw(CREATE, create_marked(name=f"pvc-{MARK}"))
    await assert_refused_without_effect(csi, base, call, INVALID, "name", "UTF-8")


async def test_nested_field_that_is_not_utf8_is_invalid_argument_naming_its_path(
    csi: RunningDriver, base: Base
) -> None:
    call = raw(CREATE, create_marked(fs_type=MARK))
    await assert_refused_without_effect(
        csi, base, call, INVALID, "volume_capabilities[0].mount.fs_type"
    )


async def test_parameter_value_that_is_not_utf8_is_invalid_argument_naming_its_key(
    csi: RunningDriver, base: Base
) -> None:
    call = raw(CREATE, create_marked(parameters={"kind": MARK}))
    await assert_refused_without_effect(csi, base, call, INVALID, "parameters['kind']")


async def test_node_path_that_is_not_utf8_is_invalid_argument_naming_it(
    csi: RunningDriver, base: Base
) -> None:
    request = pb.NodeUnpublishVolumeRequest(
        volume_id=base.volume_id, target_path=f"{base.target}{MARK}"
    )
    call = raw("/csi.v1.Node/NodeUnpublishVolume", request)
    await assert_refused_without_effect(csi, base, call, INVALID, "target_path")


async def test_bytes_that_are_no_request_are_invalid_argument(
    csi: RunningDriver, base: Base
) -> None:
    call = raw(CREATE, create_marked(), wire=lambda data: data[: len(data) // 2] + b"\xff")
    await assert_refused_without_effect(
        csi, base, call, INVALID, "not a valid csi.v1.CreateVolumeRequest"
    )


@pytest.mark.parametrize("character", ["\t", "\n", "\r"], ids=["tab", "newline", "return"])
async def test_name_with_common_whitespace_is_accepted(csi: RunningDriver, character: str) -> None:
    # Spec (CreateVolumeRequest.name): "Any Unicode string that conforms to the length
    # limit is allowed except those containing" the banned characters, which leave out
    # U+0009, U+000A and U+000D.
    volume = await create_volume(csi, f"pvc{character}x")

    assert volume.volume_id


async def test_name_of_exactly_128_bytes_is_accepted(csi: RunningDriver) -> None:
    volume = await create_volume(csi, "n" * 128)

    assert volume.volume_id


# -- unsupported values --------------------------------------------------------------------


def with_content_source(csi: RunningDriver, base: Base) -> Awaitable[Any]:
    request = create_request("pvc-new")
    request.volume_content_source.snapshot.snapshot_id = "snap-1"
    return csi.controller.CreateVolume(request)


UNSUPPORTED: dict[str, tuple[Call, str]] = {
    "unknown-parameter": (create(parameters={"speed": "fast"}), "speed"),
    "unknown-kind": (create(parameters={"kind": "raid5"}), "raid5"),
    "unknown-access-mode": (
        create(
            volume_capabilities=[
                pb.VolumeCapability(
                    mount=pb.VolumeCapability.MountVolume(),
                    access_mode=pb.VolumeCapability.AccessMode(mode=99),  # type: ignore[arg-type]
                )
            ]
        ),
        "access_mode",
    ),
    "content-source": (with_content_source, "volume_content_source"),
    "get-capacity-unknown-parameter": (
        by_id("GetCapacity", pb.GetCapacityRequest, parameters={"tier": "gold"}),
        "tier",
    ),
}


@pytest.mark.parametrize("case", list(UNSUPPORTED))
async def test_unsupported_value_is_invalid_argument_naming_it_and_changes_nothing(
    csi: RunningDriver, base: Base, case: str
) -> None:
    call, fragment = UNSUPPORTED[case]

    await assert_refused_without_effect(csi, base, call, INVALID, fragment)


@pytest.mark.parametrize(
    "case", ["unknown-parameter", "unknown-kind", "get-capacity-unknown-parameter"]
)
async def test_unknown_parameter_or_kind_names_the_parameters_field(
    csi: RunningDriver, base: Base, case: str
) -> None:
    # Found by tests/fuzz: "unknown parameter ''" named the key but not the field.
    call, key = UNSUPPORTED[case]

    await assert_refused_without_effect(csi, base, call, INVALID, "parameters:", key)


async def test_refused_create_does_not_reserve_the_name(csi: RunningDriver, base: Base) -> None:
    with pytest.raises(grpc.aio.AioRpcError):
        await create(parameters={"speed": "fast"})(csi, base)

    volume = await create_volume(csi, "pvc-new", 2 * GiB)

    assert volume.capacity_bytes == 2 * GiB


# -- ControllerPublishVolume (needs attach) --------------------------------------------------


@pytest.fixture
async def attach(start_driver: StartDriver) -> RunningDriver:
    return await start_driver(attach_required=True)


PUBLISH_MISSING = {
    "volume_id": pb.ControllerPublishVolumeRequest(
        node_id="node-1", volume_capability=mount_capability()
    ),
    "node_id": pb.ControllerPublishVolumeRequest(
        volume_id="{id}", volume_capability=mount_capability()
    ),
    "volume_capability": pb.ControllerPublishVolumeRequest(volume_id="{id}", node_id="node-1"),
}


@pytest.mark.parametrize("field", list(PUBLISH_MISSING))
async def test_controller_publish_missing_a_required_field_is_invalid_argument_and_attaches_nothing(
    attach: RunningDriver, field: str
) -> None:
    volume = await create_volume(attach, "pvc-att")
    request = pb.ControllerPublishVolumeRequest()
    request.CopyFrom(PUBLISH_MISSING[field])
    if request.volume_id == "{id}":
        request.volume_id = volume.volume_id

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await attach.controller.ControllerPublishVolume(request)

    assert_status(raised, INVALID, field)
    status = await attach.controller.ControllerGetVolume(
        pb.ControllerGetVolumeRequest(volume_id=volume.volume_id)
    )
    assert list(status.status.published_node_ids) == []


async def test_controller_unpublish_without_volume_id_is_invalid_argument(
    attach: RunningDriver,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await attach.controller.ControllerUnpublishVolume(
            pb.ControllerUnpublishVolumeRequest(node_id="node-1")
        )

    assert_status(raised, INVALID, "volume_id")


# -- found by the long fuzz run ------------------------------------------------------------


async def test_stats_of_a_volume_path_with_a_nul_byte_is_invalid_argument(
    csi: RunningDriver, base: Base
) -> None:
    # Was INTERNAL: os.stat's "embedded null byte" ValueError.
    await assert_refused_without_effect(
        csi, base, node_stats(path=f"{base.target}\x00"), INVALID, "volume_path"
    )


async def test_node_expand_of_a_block_volume_beyond_the_host_file_size_is_out_of_range(
    csi: RunningDriver, tmp_path: Path
) -> None:
    # Was INTERNAL: os.truncate's EFBIG ("File too large").
    capability = pb.VolumeCapability(
        block=pb.VolumeCapability.BlockVolume(),
        access_mode=pb.VolumeCapability.AccessMode(mode=SINGLE_NODE_WRITER),
    )
    volume = await create_volume(csi, "pvc-block", GiB, capabilities=[capability])
    await stage(csi, volume.volume_id, tmp_path / "staging-block", capability)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.node.NodeExpandVolume(
            pb.NodeExpandVolumeRequest(
                volume_id=volume.volume_id,
                volume_path=str(tmp_path / "staging-block"),
                capacity_range=pb.CapacityRange(required_bytes=2**63 - 1),
            )
        )

    assert_status(raised, OUT_OF_RANGE, "capacity_range.required_bytes")


async def test_inline_ephemeral_block_volume_names_volume_capability(
    csi: RunningDriver, tmp_path: Path
) -> None:
    capability = pb.VolumeCapability(
        block=pb.VolumeCapability.BlockVolume(),
        access_mode=pb.VolumeCapability.AccessMode(mode=SINGLE_NODE_WRITER),
    )

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.node.NodePublishVolume(
            pb.NodePublishVolumeRequest(
                volume_id="eph-1",
                target_path=str(tmp_path / "target-eph"),
                volume_capability=capability,
                volume_context={"csi.storage.k8s.io/ephemeral": "true"},
            )
        )

    assert_status(raised, INVALID, "volume_capability", "mount access type")
