"""Every CSI RPC the driver serves, fed generated bad (and some valid) requests.

Each example optionally sets up a real volume (created, attached, staged, published) so
that requests can refer to something that exists, then sends one to three requests of
the method under test whose fields are drawn from valid values and from bad ones: empty,
over-long (> 128 bytes, a megabyte), NUL and control characters, traversal paths,
negative and int64-edge sizes, unknown enum values, missing fields, block and mount in
one request, random maps. Properties, for every answer:

* OK, or a status code that is neither INTERNAL nor UNKNOWN, with a message;
* an INVALID_ARGUMENT names a field of the request, and the bad one when only one field
  was bad;
* a successful NodeStage/NodePublish created its path inside the sandbox's ``paths``,
  and nothing ever appears elsewhere in the sandbox (``outside``, the working directory);
* afterwards Probe says ready, GetCapacity answers, and once the example's volumes and
  snapshots are cleaned up with valid calls the capacity is exactly what it was (nothing
  leaked).

The driver takes snapshots (full accounting, ready at once) and clones volumes, so content
sources and the snapshot RPCs are fuzzed with real snapshots and volumes to refer to.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import given
from hypothesis import strategies as st

from csi_mock.proto import csi_pb2 as pb
from tests.driver.csi_helpers import NODE_KEY, GiB, MiB
from tests.fuzz.conftest import BackgroundDriver, Sandbox, fuzz_settings, start_background_driver

Mode = pb.VolumeCapability.AccessMode
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
EPHEMERAL_KEY = "csi.storage.k8s.io/ephemeral"
FORBIDDEN = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}
TIMEOUT = 30.0

SERVED = {
    "Identity": ("GetPluginInfo", "GetPluginCapabilities", "Probe"),
    "Controller": tuple(m.name for m in pb.DESCRIPTOR.services_by_name["Controller"].methods),
    "Node": tuple(m.name for m in pb.DESCRIPTOR.services_by_name["Node"].methods),
}
METHODS = [(service, method) for service, methods in SERVED.items() for method in methods]
# The volume RPCs get more of the budget than the constant answers.
EXAMPLES = {
    "Identity": 15,
    "ControllerGetCapabilities": 15,
    "NodeGetCapabilities": 15,
    "NodeGetInfo": 15,
}
DEFAULT_EXAMPLES = 50
# Fields each RPC requires: leaving one out makes a request bad in that field.
REQUIRED = {
    "CreateVolume": {"name", "volume_capabilities"},
    "DeleteVolume": {"volume_id"},
    "ControllerPublishVolume": {"volume_id", "node_id", "volume_capability"},
    "ControllerUnpublishVolume": {"volume_id"},
    "ValidateVolumeCapabilities": {"volume_id", "volume_capabilities"},
    "ControllerExpandVolume": {"volume_id", "capacity_range"},
    "ControllerGetVolume": {"volume_id"},
    "ControllerModifyVolume": {"volume_id", "mutable_parameters"},
    "CreateSnapshot": {"name", "source_volume_id"},
    "DeleteSnapshot": {"snapshot_id"},
    "GetSnapshot": {"snapshot_id"},
    "NodeStageVolume": {"volume_id", "staging_target_path", "volume_capability"},
    "NodeUnstageVolume": {"volume_id", "staging_target_path"},
    "NodePublishVolume": {"volume_id", "target_path", "volume_capability"},
    "NodeUnpublishVolume": {"volume_id", "target_path"},
    "NodeGetVolumeStats": {"volume_id", "volume_path"},
    "NodeGetVolumeHealth": {"volume_id"},
    "ControllerGetVolumeHealth": {"volume_id"},
    "NodeExpandVolume": {"volume_id", "volume_path"},
}
# Mutable parameters the driver accepts (MODIFY_VOLUME is on).
MODIFY = {"mutable_parameters": {"iops": [], "tier": ["gold", "silver"]}}
# Snapshots and clones are on: content sources and the snapshot RPCs do real work.
SNAPSHOTS = {"accounting": "full", "ready_after": "0s"}
# Fields the driver refuses whenever they are set (features it does not offer), by full
# name: CreateVolume's accessibility_requirements are served, CreateSnapshot's are not
# (no SNAPSHOT_ACCESSIBILITY_CONSTRAINTS).
UNSUPPORTED: frozenset[str] = frozenset({"csi.v1.CreateSnapshotRequest.accessibility_requirements"})
# CSI v1.13's health RPCs are on: they answer for real volumes, not UNIMPLEMENTED.
HEALTH_NODE = {"volume_health": True, "storage_health": True}


# -- the driver of this module -----------------------------------------------------------


@pytest.fixture(scope="module")
def fuzzed(sandbox: Sandbox) -> Iterator[BackgroundDriver]:
    driver = start_background_driver(
        sandbox,
        admin=False,
        attach_required=True,
        controller={
            "modify": MODIFY,
            "snapshots": SNAPSHOTS,
            "clones": True,
            "volume_health": True,
        },
        node={"id": "node-1", "mount": "directory", "block_device": "file", **HEALTH_NODE},
    )
    try:
        yield driver
    finally:
        driver.close()


# -- values --------------------------------------------------------------------------------

CONTROL = st.characters(codec="utf-8", max_codepoint=0x9F).filter(lambda c: c < " " or c >= "\x7f")
TRICKY = [
    "",
    "\x00",
    "a\x00b",
    "\n",
    "\t",
    "\x7f",
    "\x85",
    " ",
    "..",
    ".",
    "/",
    "//",
    "../../../../etc/passwd",
    "/etc/passwd",
    "~",
    "$(id)",
    "%2e%2e%2f",
    "link -> /etc",
    "C:\\Windows",
    "\\\\server\\share",
    "vol-",
    "vol-" + "0" * 32,
    "VOL-ABC",
    " vol-1",
    "*",
    "[",
    "%s%n",
    "\u202e",
    "\ufeff",
    "\U0001f600",
    "node-1\x00",
    "9223372036854775808",
    "1" * 30,
]
HUGE = st.builds(
    lambda size, char: char * size,
    st.sampled_from([129, 256, 4096, 1 << 20]),
    st.sampled_from(["a", "é", "\x00", "/", "\U0001f600"]),
)
BAD_TEXT = st.one_of(
    st.sampled_from(TRICKY),
    st.text(max_size=24),
    st.text(CONTROL, min_size=1, max_size=4),
    st.text(min_size=129, max_size=200),
    HUGE,
)
SIZES = st.one_of(
    st.sampled_from(
        [0, 1, -1, INT64_MAX, INT64_MIN, 2**62, 4096, MiB, GiB, 4 * GiB, 4 * GiB + 1, 8 * GiB]
    ),
    st.integers(INT64_MIN, INT64_MAX),
)
INT32S = st.one_of(
    st.sampled_from([0, 1, -1, 2, INT32_MAX, INT32_MIN]), st.integers(INT32_MIN, INT32_MAX)
)
ENUMS = st.one_of(st.integers(0, 8), st.sampled_from([-1, 9, 100, INT32_MAX, INT32_MIN]))
KNOWN_MODES = frozenset(int(v.number) for v in Mode.DESCRIPTOR.enum_types_by_name["Mode"].values)


@dataclass
class Draws:
    """What the example knows: real objects to refer to, and which fields were bad."""

    sandbox: Sandbox
    data: st.DataObject
    volume_ids: list[str] = field(default_factory=list)
    snapshot_ids: list[str] = field(default_factory=list)
    publish_context: dict[str, str] = field(default_factory=dict)
    stagings: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    bad: set[str] = field(default_factory=set)
    required: frozenset[str] = frozenset()

    def draw(self, strategy: st.SearchStrategy[Any], label: str = "") -> Any:
        return self.data.draw(strategy, label=label or None)

    def text(self, name: str, good: list[str]) -> str:
        """A good value when there is one (two times in three), else a bad one."""
        if good and self.draw(st.integers(0, 2)):
            return str(self.draw(st.sampled_from(good)))
        value = str(self.draw(BAD_TEXT))
        self.bad.add(name)
        return value

    def path(self, name: str, good: list[str]) -> str:
        """A recorded path, a new one inside sandbox.paths, or a bad one.

        Bad paths never name an existing place outside the sandbox in a form the driver
        could accept: directory mode's NodeUnpublish removes what is at the target.
        """
        choice = self.draw(st.integers(0, 5))
        if good and choice <= 1:
            return str(self.draw(st.sampled_from(good)))
        if choice <= 3:
            return self.sandbox_path()
        value = str(self.draw(st.sampled_from(self.bad_paths())))
        self.bad.add(name)
        return value

    def sandbox_path(self) -> str:
        """A path inside sandbox.paths, spelt in one of the ways that resolve there."""
        base = str(self.sandbox.paths)
        prefix = self.draw(
            st.sampled_from([base, "/proc/self/root" + base, base.replace("/", "//"), base + "/."])
        )
        parts = self.draw(
            st.lists(
                st.one_of(
                    st.sampled_from(["a", "b", "file", "target", ".", "", " ", "x" * 255]),
                    st.text(st.characters(codec="utf-8", exclude_characters="/\x00"), max_size=8),
                ),
                min_size=1,
                max_size=3,
            )
        )
        return "/".join([prefix, *parts])

    def bad_paths(self) -> list[str]:
        paths, outside = self.sandbox.paths, self.sandbox.outside
        return [
            "",
            "\x00",
            f"{paths}/a\x00b",
            f"{paths}/../outside/x",
            f"{paths}/a/../../outside",
            f"{paths}/..",
            "/../../../../etc/passwd",
            "/proc/self/root/../etc",
            "../outside/x",
            "outside/x",
            "x",
            " ",
            "~/x",
            "C:\\Windows",
            "\\\\server\\share",
            "link -> /etc",
            f"{outside.relative_to('/')}/x",
            f"{paths}/a/" + "y" * 256,
            f"{paths}/" + "/".join(["d"] * 2100),
            f"{paths}/" + "é" * 2100,
            "a" * (1 << 20),
            f"{paths}/file/x",  # sandbox.paths/file is a file
        ]

    def mapping(self, name: str, good: dict[str, str] | None = None) -> dict[str, str]:
        if good is not None and self.draw(st.booleans()):
            return dict(good)
        value = self.draw(
            st.dictionaries(
                st.one_of(
                    st.sampled_from(["kind", EPHEMERAL_KEY, "size", "csi-mock/size"]), BAD_TEXT
                ),
                st.one_of(st.sampled_from(["striped", "mirrored", "true", "1Gi", "-1"]), BAD_TEXT),
                max_size=3,
            )
        )
        if value and name in ("parameters", "mutable_parameters"):
            self.bad.add(name)  # the driver ignores random secrets and contexts
        return dict(value)


def capability(draws: Draws) -> pb.VolumeCapability:
    message = pb.VolumeCapability()
    kind = draws.draw(st.sampled_from(["mount", "block", "none"]))
    if kind == "mount":
        message.mount.fs_type = draws.draw(
            st.one_of(st.sampled_from(["", "ext4", "xfs"]), BAD_TEXT)
        )
        message.mount.mount_flags.extend(draws.draw(st.lists(BAD_TEXT, max_size=2)))
        message.mount.volume_mount_group = draws.draw(st.sampled_from(["", "1000", "\x00"]))
        if message.mount.volume_mount_group:
            # The fuzzed driver does not advertise VOLUME_MOUNT_GROUP: the node
            # service refuses any group (the controller may ignore it).
            draws.bad.add("volume_mount_group")
    elif kind == "block":
        message.block.SetInParent()
    else:
        draws.bad.add("access_type")
    mode = draws.draw(st.one_of(st.sampled_from(sorted(KNOWN_MODES - {0})), ENUMS))
    if draws.draw(st.integers(0, 5)):
        message.access_mode.mode = mode
    if message.access_mode.mode not in KNOWN_MODES - {0}:
        draws.bad.add("access_mode")
    return message


def capacity_range(draws: Draws) -> pb.CapacityRange:
    required = draws.draw(st.one_of(st.sampled_from([0, MiB, GiB, 2 * GiB]), SIZES))
    limit = draws.draw(st.one_of(st.just(0), SIZES))
    if required < 0 or limit < 0 or (required == 0 and "capacity_range" in draws.required):
        draws.bad.add("capacity_range")
    return pb.CapacityRange(required_bytes=required, limit_bytes=limit)


def topology(draws: Draws) -> pb.Topology:
    segments = draws.draw(
        st.one_of(
            st.sampled_from([{NODE_KEY: "node-1"}, {NODE_KEY: "node-2"}, {}]),
            st.dictionaries(st.one_of(st.just(NODE_KEY), BAD_TEXT), BAD_TEXT, max_size=2),
        )
    )
    return pb.Topology(segments=segments)


def fill(message: Message, draws: Draws, depth: int = 0) -> None:
    """Set a random subset of `message`'s fields, from valid and bad values by name."""
    for fd in message.DESCRIPTOR.fields:
        if not draws.draw(st.integers(0, 4)):
            if fd.name in draws.required:
                draws.bad.add(fd.name)  # a required field left out
            continue
        set_field(message, fd, draws, depth)


def set_field(message: Message, fd: Any, draws: Draws, depth: int) -> None:
    name = fd.name
    if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        good: dict[str, str] | None = {}
        if name == "parameters":
            good = {"kind": draws.draw(st.sampled_from(["striped", "mirrored"]))}
        elif name == "mutable_parameters":
            good = draws.draw(st.sampled_from([{"tier": "gold"}, {"tier": "silver", "iops": "1"}]))
        elif name == "publish_context":
            good = draws.publish_context
        elif name == "volume_context":
            good = draws.draw(st.sampled_from([{}, {EPHEMERAL_KEY: "true", "size": "1Mi"}]))
        getattr(message, name).update(draws.mapping(name, good))
        return
    if fd.is_repeated:
        if name in ("volume_capabilities",):
            items = draws.draw(st.integers(0, 3))
            caps = [capability(draws) for _ in range(items)]
            if not caps or len({c.WhichOneof("access_type") for c in caps}) > 1:
                draws.bad.add(name)  # none, or block and mount at once
            getattr(message, name).extend(caps)
        elif name in ("requisite", "preferred"):
            getattr(message, name).extend(
                topology(draws) for _ in range(draws.draw(st.integers(0, 2)))
            )
        elif fd.type == FieldDescriptor.TYPE_STRING:
            getattr(message, name).extend(draws.draw(st.lists(BAD_TEXT, max_size=2)))
        return
    target: Any = getattr(message, name)
    if fd.message_type is not None:
        if name == "volume_capability":
            target.CopyFrom(capability(draws))
        elif name == "capacity_range":
            target.CopyFrom(capacity_range(draws))
        elif name == "accessible_topology":
            target.CopyFrom(topology(draws))
        elif depth < 3:
            if fd.full_name in UNSUPPORTED:
                draws.bad.add(name)
            target.SetInParent()
            fill(target, draws, depth + 1)
            if name == "volume_content_source":
                mark_missing_source(target, draws)
        return
    if fd.type == FieldDescriptor.TYPE_STRING:
        if name in ("target_path", "staging_target_path", "volume_path"):
            known = draws.targets if name != "staging_target_path" else draws.stagings
            value = draws.path(name, known + draws.stagings if name == "volume_path" else known)
        elif name == "volume_id" or name.endswith("volume_id"):
            value = draws.text(name, draws.volume_ids)
        elif name == "snapshot_id":
            value = draws.text(name, draws.snapshot_ids)
        elif name == "node_id":
            value = draws.text(name, ["node-1"])
        elif name == "name":
            value = draws.text(name, [f"pvc-{draws.draw(st.integers(0, 5))}"])
        elif name == "starting_token":
            value = draws.text(name, ["1", "0", "2"])
        else:
            value = draws.draw(BAD_TEXT)
        setattr(message, name, value)
    elif fd.type == FieldDescriptor.TYPE_BOOL:
        setattr(message, name, draws.draw(st.booleans()))
    elif fd.type == FieldDescriptor.TYPE_ENUM:
        setattr(message, name, draws.draw(ENUMS))
    elif fd.type in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64):
        setattr(message, name, draws.draw(SIZES))
    elif fd.type == FieldDescriptor.TYPE_INT32:
        value = draws.draw(INT32S)
        if value < 0:
            draws.bad.add(name)
        setattr(message, name, value)
    elif fd.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        setattr(message, name, draws.draw(st.floats(allow_nan=True)))


def mark_missing_source(source: Any, draws: Draws) -> None:
    """A content source without a type, or without its ID, is bad in that field.

    Its two types are a oneof: filling the second replaces the first, so what the
    first's ID made bad is gone from the request (the long run drew a volume source
    after a snapshot one with a bad ID, and expected snapshot_id to be named)."""
    which = source.WhichOneof("type")
    replaced = {"snapshot": "volume_id", "volume": "snapshot_id"}.get(which or "")
    if replaced is not None:
        draws.bad.discard(replaced)
    if which is None:
        draws.bad.add("volume_content_source")
    elif which == "snapshot" and not source.snapshot.snapshot_id:
        draws.bad.add("snapshot_id")
    elif which == "volume" and not source.volume.volume_id:
        draws.bad.add("volume_id")


def mark_bad_combinations(request: Message, draws: Draws) -> None:
    """What is bad only with the rest of the request or the host: a node path that
    passes through a symbolic link (/proc/self/root, say: links are not followed), and
    a block capability for an inline ephemeral volume (NodePublish's volume_context),
    which must be a mount volume."""
    fields = request.DESCRIPTOR.fields_by_name
    for name in ("staging_target_path", "target_path"):
        if name in fields and passes_through_link(getattr(request, name)):
            draws.bad.add(name)
    if "volume_context" not in fields or "volume_capability" not in fields:
        return
    ephemeral = request.volume_context.get(EPHEMERAL_KEY) == "true"  # type: ignore[attr-defined]
    capability = request.volume_capability  # type: ignore[attr-defined]
    if ephemeral and capability.WhichOneof("access_type") == "block":
        draws.bad.add("volume_capability")


def passes_through_link(path: str) -> bool:
    """Whether a component of the absolute `path` that exists is a symbolic link."""
    if not path.startswith("/") or "\x00" in path:
        return False
    current = ""
    for name in path.split("/")[1:]:
        current += "/" + name
        try:
            if os.path.islink(current):
                return True
        except (OSError, ValueError):
            return False
    return False


def request_type(service: str, method: str) -> type[Message]:
    descriptor = pb.DESCRIPTOR.services_by_name[service].methods_by_name[method].input_type
    return getattr(pb, descriptor.name)  # type: ignore[no-any-return]


def field_names(descriptor: Any, depth: int = 0) -> set[str]:
    names = set()
    for fd in descriptor.fields:
        names.add(fd.name)
        if fd.message_type is not None and depth < 4:
            names |= field_names(fd.message_type, depth + 1)
    return names


# -- calls and properties ------------------------------------------------------------------


@dataclass
class Answer:
    code: grpc.StatusCode
    details: str
    response: Any = None


def call(driver: BackgroundDriver, service: str, method: str, request: Message) -> Answer:
    stub = {"Identity": driver.identity, "Controller": driver.controller, "Node": driver.node}
    try:
        response = getattr(stub[service], method)(request, timeout=TIMEOUT)
    except grpc.RpcError as error:
        return Answer(error.code(), error.details() or "")
    return Answer(grpc.StatusCode.OK, "", response)


def must(driver: BackgroundDriver, service: str, method: str, request: Message) -> Any:
    answer = call(driver, service, method, request)
    assert answer.code is grpc.StatusCode.OK, f"{method}: {answer.code.name}: {answer.details}"
    return answer.response


def check_answer(answer: Answer, method: str, request: Message, bad: set[str]) -> None:
    def shown() -> str:  # only on failure: printing a megabyte request takes a while
        return f"{method}({short(request)}) -> {answer.code.name}: {answer.details[:300]!r}"

    assert answer.code not in FORBIDDEN, shown()
    if answer.code is grpc.StatusCode.OK:
        return
    assert answer.details.strip(), f"empty message: {shown()}"
    assert "metadata size" not in answer.details, f"status lost in transport: {shown()}"
    if answer.code is grpc.StatusCode.INVALID_ARGUMENT:
        names = field_names(request.DESCRIPTOR)
        assert any(name in answer.details for name in names), f"names no field: {shown()}"
        if len(bad) == 1:
            (only,) = bad
            assert only in answer.details, f"does not name {only}: {shown()}"


def short(request: Message) -> str:
    if request.ByteSize() > 4096:
        return f"{request.ByteSize()} bytes, fields {[f.name for f, _ in request.ListFields()]}"
    return str(request).replace("\n", " ")


def check_paths(driver: BackgroundDriver, method: str, request: Message, answer: Answer) -> None:
    if answer.code is not grpc.StatusCode.OK:
        return
    if method not in ("NodeStageVolume", "NodePublishVolume"):
        return
    for name in ("staging_target_path", "target_path"):
        if name not in request.DESCRIPTOR.fields_by_name:
            continue  # NodeStageVolume has no target_path
        path: str = getattr(request, name)
        if path:
            resolved = os.path.realpath(path)
            inside = os.path.realpath(driver.sandbox.paths)
            assert resolved == inside or resolved.startswith(inside + os.sep), (
                f"{method} accepted {name} {getattr(request, name)!r}, outside {inside}"
            )


# -- set-up and clean-up with valid calls --------------------------------------------------


def set_up(driver: BackgroundDriver, draws: Draws) -> None:
    """Maybe a real volume, attached, staged and published, for requests to refer to."""
    depth = draws.draw(st.integers(0, 4), "set-up depth")
    if depth == 0:
        return
    block = draws.draw(st.booleans(), "block")
    cap = pb.VolumeCapability(access_mode=Mode(mode=Mode.SINGLE_NODE_WRITER))
    if block:
        cap.block.SetInParent()
    else:
        cap.mount.SetInParent()
    created = must(
        driver,
        "Controller",
        "CreateVolume",
        pb.CreateVolumeRequest(
            name=f"base-{draws.draw(st.integers(0, 3))}",
            capacity_range=pb.CapacityRange(required_bytes=MiB),
            volume_capabilities=[cap],
        ),
    )
    volume_id = created.volume.volume_id
    draws.volume_ids.append(volume_id)
    if draws.draw(st.booleans(), "snapshot"):
        taken = must(
            driver,
            "Controller",
            "CreateSnapshot",
            pb.CreateSnapshotRequest(name=f"snap-of-{volume_id}", source_volume_id=volume_id),
        )
        draws.snapshot_ids.append(taken.snapshot.snapshot_id)
    if depth == 1:
        return
    published = must(
        driver,
        "Controller",
        "ControllerPublishVolume",
        pb.ControllerPublishVolumeRequest(
            volume_id=volume_id, node_id="node-1", volume_capability=cap
        ),
    )
    draws.publish_context = dict(published.publish_context)
    if depth == 2:
        return
    staging = str(driver.sandbox.paths / f"staging-{volume_id}")
    must(
        driver,
        "Node",
        "NodeStageVolume",
        pb.NodeStageVolumeRequest(
            volume_id=volume_id,
            staging_target_path=staging,
            volume_capability=cap,
            publish_context=draws.publish_context,
        ),
    )
    draws.stagings.append(staging)
    if depth == 3:
        return
    target = str(driver.sandbox.paths / f"target-{volume_id}")
    must(
        driver,
        "Node",
        "NodePublishVolume",
        pb.NodePublishVolumeRequest(
            volume_id=volume_id,
            staging_target_path=staging,
            target_path=target,
            volume_capability=cap,
            publish_context=draws.publish_context,
        ),
    )
    draws.targets.append(target)


def clean_up(driver: BackgroundDriver) -> None:
    """Undo everything with valid calls: every publication, staging, attachment, volume
    and snapshot."""
    store = driver.driver.store
    for entry in must(driver, "Controller", "ListSnapshots", pb.ListSnapshotsRequest()).entries:
        must(
            driver,
            "Controller",
            "DeleteSnapshot",
            pb.DeleteSnapshotRequest(snapshot_id=entry.snapshot.snapshot_id),
        )
    for publication in driver.on_loop(store.publications):
        must(
            driver,
            "Node",
            "NodeUnpublishVolume",
            pb.NodeUnpublishVolumeRequest(
                volume_id=publication.volume_id, target_path=publication.target_path
            ),
        )
    listed = must(driver, "Controller", "ListVolumes", pb.ListVolumesRequest())
    for entry in listed.entries:
        volume_id = entry.volume.volume_id
        staging = driver.on_loop(functools.partial(store.staging, volume_id))
        if staging is not None:
            must(
                driver,
                "Node",
                "NodeUnstageVolume",
                pb.NodeUnstageVolumeRequest(
                    volume_id=volume_id, staging_target_path=staging.staging_path
                ),
            )
        must(
            driver,
            "Controller",
            "ControllerUnpublishVolume",
            pb.ControllerUnpublishVolumeRequest(volume_id=volume_id),
        )
        must(driver, "Controller", "DeleteVolume", pb.DeleteVolumeRequest(volume_id=volume_id))
    driver.sandbox.empty_paths()


def capacities(driver: BackgroundDriver) -> list[tuple[int, int]]:
    found = []
    for node in ("node-1", "node-2"):
        for kind in ("striped", "mirrored"):
            report = must(
                driver,
                "Controller",
                "GetCapacity",
                pb.GetCapacityRequest(
                    accessible_topology=pb.Topology(segments={NODE_KEY: node}),
                    parameters={"kind": kind},
                ),
            )
            assert report.available_capacity >= 0
            assert 0 <= report.maximum_volume_size.value <= report.available_capacity or (
                report.available_capacity == 0
            )
            found.append((report.available_capacity, report.maximum_volume_size.value))
    return found


def check_still_serving(driver: BackgroundDriver) -> None:
    probe = must(driver, "Identity", "Probe", pb.ProbeRequest())
    assert probe.ready.value, "Probe: not ready"
    capacities(driver)


# -- the tests ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(("service", "method"), METHODS, ids=[m for _, m in METHODS])
def test_any_request_gets_a_specific_status_naming_the_field(
    fuzzed: BackgroundDriver, service: str, method: str
) -> None:
    initial = capacities(fuzzed)
    examples = EXAMPLES.get(method, EXAMPLES.get(service, DEFAULT_EXAMPLES))

    @fuzz_settings(examples)
    @given(data=st.data())
    def example(data: st.DataObject) -> None:
        draws = Draws(fuzzed.sandbox, data, required=frozenset(REQUIRED.get(method, ())))
        try:
            set_up(fuzzed, draws)
            for _ in range(draws.draw(st.integers(1, 3), "calls")):
                draws.bad = set()
                request = request_type(service, method)()
                fill(request, draws)
                mark_bad_combinations(request, draws)
                answer = call(fuzzed, service, method, request)
                check_answer(answer, method, request, draws.bad)
                check_paths(fuzzed, method, request, answer)
                assert fuzzed.sandbox.entries_outside_paths() == []
            check_still_serving(fuzzed)
        finally:
            clean_up(fuzzed)
        assert capacities(fuzzed) == initial, "capacity leaked after clean-up"

    example()
