"""Stateful property test: random call sequences against a `csi-mock serve` process.

A hypothesis RuleBasedStateMachine drives the controller and node services, the capacity
knobs of the admin API, SIGKILL at random points (also while a call is in flight) and
commits that fail (the driver's file size limit dropped to 0, so SQLite cannot write).
A model (tests/driver/stateful_model.py) predicts every answer; after every step the
database rows, ListVolumes, GetCapacity, the admin API's pool accounting, the backing
files and (as root) the mounts and loop devices must agree with it. After a kill the
database is read *before* the restart, so `load()` cannot hide a transaction bug.

CI runs a fixed, bounded number of examples (about 60-90 s on 2 cores);
CSI_MOCK_STATEFUL_PROFILE=long runs ten times as many (docs/design.md, "Testing").
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from csi_mock.admin.client import AdminError
from csi_mock.host.loop import KernelLoopDevices
from csi_mock.proto import csi_pb2 as pb
from tests.driver.csi_helpers import backing_entries, mount_points
from tests.driver.stateful_model import (
    KIND_COST,
    LOCATIONS,
    NODE_ID,
    NODE_KEY,
    POOLS,
    SPECS,
    DriverModel,
    MiB,
    StoreView,
    VolumeModel,
)
from tests.driver.subprocess_driver import DriverProcess, StoreSnapshot, read_store

Mode = pb.VolumeCapability.AccessMode
REAL_MOUNTS = os.geteuid() == 0

PROFILES = {
    # name: (examples, steps per example, kills per example)
    "smoke": (2, 15, 2),
    "ci": (30, 40, 1),
    "long": (300, 40, 1),
}
PROFILE = os.environ.get("CSI_MOCK_STATEFUL_PROFILE", "ci")
EXAMPLES, STEPS, MAX_KILLS = PROFILES[PROFILE]

# Volume sizes: 32 MiB steps up to 1.25 GiB (larger than any pool takes), and odd byte
# counts; block volumes are sparse files, so none of this is written to disk.
SIZES = st.one_of(st.integers(1, 40).map(lambda n: n * 32 * MiB), st.integers(1, 64 * MiB))
PICK = st.integers(0, 1 << 16)
OUTCOMES: Counter[str] = Counter()
"""Answers seen, by call and code: printed at the end, so a run shows what it covered."""

# Calls that change state, run with a failing commit: each must answer INTERNAL (500)
# and leave database, memory and mounts as they were. (Unstage and unpublish unmount
# before they commit, so a failed commit there leaves a record without its mount, which
# their retry clears; the model does not predict that in-between state.)
FAILING_COMMIT_OPS = (
    "create",
    "delete",
    "expand",
    "controller_publish",
    "consume",
    "resize",
    "stage",
    "publish",
)
IN_FLIGHT_OPS = (
    "create",
    "delete",
    "expand",
    "controller_publish",
    "controller_unpublish",
    "stage",
    "publish",
    "unpublish",
    "unstage",
    None,
)


def driver_config() -> dict[str, Any]:
    return {
        "attach_required": True,
        "node": {"id": NODE_ID, "mount": "bind" if REAL_MOUNTS else "directory"},
        "kinds": {kind: {"cost": cost} for kind, cost in KIND_COST.items()},
        "pools": [spec.to_config() for spec in POOLS],
    }


@dataclass
class Call:
    """One call to make, with its model prediction (code, model afterwards)."""

    run: Callable[[], Any]
    code: str
    after: DriverModel
    adopt: Callable[[Any], None] | None = None
    """Records what only the answer tells (a new volume's ID) in `after`."""
    send_future: Callable[[], grpc.Future[Any]] | None = None
    """The same call without waiting (gRPC calls only), for a kill while in flight."""
    admin: bool = False
    """An admin API call: codes are HTTP statuses."""
    label: str = ""


class DriverMachine(RuleBasedStateMachine):
    driver: DriverProcess
    root: Path

    def __init__(self) -> None:
        super().__init__()
        self.model = DriverModel()
        self.names = 0
        self.kills = 0
        self.deleted: list[str] = []
        self.second_driver_tried = False
        for directory in ("staging", "pods"):
            (self.root / directory).mkdir(exist_ok=True)

    # -- rules: controller --------------------------------------------------------------

    @rule(
        size=SIZES,
        limit=st.sampled_from(["none", "exact", "below"]),
        kind=st.sampled_from(sorted(KIND_COST)),
        block=st.booleans(),
        multi_writer=st.booleans(),
        requisite=st.sampled_from(LOCATIONS),
    )
    def create_volume(
        self,
        size: int,
        limit: str,
        kind: str,
        block: bool,
        multi_writer: bool,
        requisite: str | None,
    ) -> None:
        self.names += 1
        limit_bytes = {"none": 0, "exact": size, "below": size - 1}[limit]
        self.perform(
            self.create_call(
                f"pvc-{self.names}", size, limit_bytes, kind, block, multi_writer, requisite
            )
        )

    @precondition(lambda self: self.model.volumes)
    @rule(pick=PICK, grow=st.booleans(), shrink=st.booleans())
    def create_again(self, pick: int, grow: bool, shrink: bool) -> None:
        """Repeat a CreateVolume (a provisioner retry), compatible or not."""
        volume = self.pick(pick)
        required = volume.size + MiB if grow else max(1, volume.size // 2)
        limit = max(required, volume.size - 1) if shrink else 0
        self.perform(
            self.create_call(
                volume.name,
                required,
                limit,
                volume.kind,
                volume.block,
                volume.multi_writer,
                None,
            )
        )

    @rule(pick=PICK, stale=st.booleans())
    def delete_volume(self, pick: int, stale: bool) -> None:
        self.perform(self.delete_call(pick, stale))

    @precondition(lambda self: self.model.volumes)
    @rule(pick=PICK, size=SIZES)
    def expand_volume(self, pick: int, size: int) -> None:
        self.perform(self.expand_call(pick, size))

    @precondition(lambda self: self.model.volumes)
    @rule(pick=PICK)
    def controller_publish(self, pick: int) -> None:
        self.perform(self.controller_publish_call(pick))

    @precondition(lambda self: any(v.staged is None for v in self.model.volumes.values()))
    @rule(pick=PICK)
    def controller_unpublish(self, pick: int) -> None:
        self.perform(self.controller_unpublish_call(pick))

    # -- rules: node ---------------------------------------------------------------------

    @precondition(lambda self: self.model.volumes)
    @rule(pick=PICK, elsewhere=st.booleans())
    def node_stage(self, pick: int, elsewhere: bool) -> None:
        self.perform(self.stage_call(pick, elsewhere))

    @precondition(lambda self: self.model.volumes)
    @rule(pick=PICK, elsewhere=st.booleans())
    def node_unstage(self, pick: int, elsewhere: bool) -> None:
        self.perform(self.unstage_call(pick, elsewhere))

    @precondition(lambda self: self.model.volumes)
    @rule(pick=PICK, second=st.booleans(), readonly=st.booleans())
    def node_publish(self, pick: int, second: bool, readonly: bool) -> None:
        self.perform(self.publish_call(pick, second, readonly))

    @precondition(lambda self: self.model.volumes)
    @rule(pick=PICK, where=st.sampled_from(["link", "below a link", "state directory"]))
    def node_publish_where_it_must_not_go(self, pick: int, where: str) -> None:
        self.perform(self.misdirected_publish_call(pick, where))

    @precondition(lambda self: self.model.volumes)
    @rule(pick=PICK, second=st.booleans())
    def node_unpublish(self, pick: int, second: bool) -> None:
        self.perform(self.unpublish_call(pick, second))

    @precondition(lambda self: self.model.volumes)
    @rule(pick=PICK, second=st.booleans(), readonly=st.booleans())
    def bring_up_on_node(self, pick: int, second: bool, readonly: bool) -> None:
        """ControllerPublish, NodeStage, NodePublish of one volume, in a CO's order (each
        call predicted on its own): random single calls seldom line up like this."""
        volume = self.pick(pick, lambda v: not v.targets)
        self.perform(self.controller_publish_call(volume))
        self.perform(self.stage_call(volume, False))
        self.perform(self.publish_call(volume, second, readonly))

    @precondition(lambda self: any(v.staged or v.attached for v in self.model.volumes.values()))
    @rule(pick=PICK)
    def tear_down_on_node(self, pick: int) -> None:
        """NodeUnpublish of every target, NodeUnstage, ControllerUnpublish: a CO's order."""
        volume = self.pick(pick, lambda v: bool(v.staged or v.attached))
        self.perform(self.unpublish_call(volume, False))
        self.perform(self.unpublish_call(volume, True))
        self.perform(self.unstage_call(volume, False))
        if self.model.volumes[volume.id].staged is None:
            self.perform(self.controller_unpublish_call(volume))

    # -- rules: knobs --------------------------------------------------------------------

    @rule(pool=st.sampled_from([spec.name for spec in POOLS]), size=st.integers(0, 48))
    def resize_pool(self, pool: str, size: int) -> None:
        self.perform(self.knob_call("resize", pool, size * 32 * MiB))

    @rule(pool=st.sampled_from([spec.name for spec in POOLS]), amount=st.integers(1, 24))
    def consume_external(self, pool: str, amount: int) -> None:
        self.perform(self.knob_call("consume", pool, amount * 32 * MiB))

    @rule(pool=st.sampled_from([spec.name for spec in POOLS]), amount=st.integers(1, 24))
    def release_external(self, pool: str, amount: int) -> None:
        self.perform(self.knob_call("release", pool, amount * 32 * MiB))

    @rule(frozen=st.booleans())
    def freeze_capacity(self, frozen: bool) -> None:
        admin = self.driver.admin_client
        if frozen:
            assert admin.freeze_capacity() is True
            self.model.freeze()
        else:
            assert admin.unfreeze_capacity() is False
            self.model.unfreeze()

    # -- rules: faults ---------------------------------------------------------------------

    @precondition(lambda self: self.kills < MAX_KILLS)
    @rule(
        op=st.sampled_from(IN_FLIGHT_OPS),
        delay_ms=st.integers(0, 8),
        pick=PICK,
        size=SIZES,
        flag=st.booleans(),
    )
    def kill_9_and_restart(
        self, op: str | None, delay_ms: int, pick: int, size: int, flag: bool
    ) -> None:
        """SIGKILL, idle or with a call in flight; check the database the dead driver
        left before restarting; then retry the call, as a CO would, to its answer."""
        self.kills += 1
        call = self.call_for(op, pick, size, flag) if op else None
        OUTCOMES[f"kill -9 during {call.label if call else 'nothing'}"] += 1
        future = None
        if call is not None and call.send_future is not None:
            future = call.send_future()
            time.sleep(delay_ms / 1000)
        self.driver.kill()
        if future is not None:
            with contextlib.suppress(grpc.RpcError):  # cut off: either outcome is allowed
                future.result(timeout=5)

        outcomes = [self.model] if call is None else [self.model, self.with_adopted(call)]
        snapshot = read_store(self.driver.database)
        assert not snapshot.accounting_problems(), snapshot.accounting_problems()
        self.assert_store_is_one_of(snapshot, outcomes)
        self.assert_backing_entries(snapshot, allow_orphans=True)

        self.driver.start()
        self.model.unfreeze()  # the freeze lives in memory only
        for outcome in outcomes:
            outcome.unfreeze()
        self.assert_listed_is_one_of(outcomes)
        if call is not None:
            self.perform(call)  # the retry: now the outcome is the model's prediction

    @rule(op=st.sampled_from(FAILING_COMMIT_OPS), pick=PICK, size=SIZES, flag=st.booleans())
    def call_with_failing_commit(self, op: str, pick: int, size: int, flag: bool) -> None:
        """Run one call while the driver cannot write files (RLIMIT_FSIZE 0: SQLite's
        commit fails with a disk I/O error). A call that must change state fails with
        INTERNAL (HTTP 500) and changes nothing, in the database or in memory."""
        call = self.call_for(op, pick, size, flag)
        if call is None:
            return
        changes = call.code in ("OK", "200") and call.after.store_view() != self.model.store_view()
        pid = self.driver.pid
        limits = resource.prlimit(pid, resource.RLIMIT_FSIZE)
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (0, limits[1]))
        try:
            code = self.outcome_of(call)
        finally:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, limits)
        OUTCOMES[f"failing commit: {call.label}: {code}"] += 1
        if changes:
            expected = "500" if call.admin else "INTERNAL"
            assert code == expected, f"{op} with a failing commit answered {code}"
        else:
            assert code == call.code, f"{op} with a failing commit answered {code}, not {call.code}"
            self.model = self.with_adopted(call, self.last_answer)

    # -- invariants ------------------------------------------------------------------------

    @precondition(lambda self: not self.second_driver_tried)  # A start costs ~0.8 s.
    @rule()
    def second_driver_on_the_same_state(self) -> None:
        """A second `csi-mock serve` on this state directory exits 2 naming the lock
        and the running driver's PID, and changes nothing (the invariant checks)."""
        assert self.driver.process is not None
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
        self.second_driver_tried = True
        serve = [sys.executable, "-m", "csi_mock.cli", "serve"]
        second = subprocess.run(
            [*serve, "--config", str(self.driver.config_path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        event(f"second driver: exit {second.returncode}")
        OUTCOMES[f"second driver: exit {second.returncode}"] += 1
        assert second.returncode == 2, second.stderr
        assert f"PID {self.driver.process.pid}" in second.stderr, second.stderr

    @invariant()
    def everything_agrees_with_the_model(self) -> None:
        snapshot = read_store(self.driver.database)
        assert not snapshot.accounting_problems(), snapshot.accounting_problems()
        self.assert_store_is_one_of(snapshot, [self.model])
        self.assert_listed_is_one_of([self.model])
        self.assert_pools_and_capacity()
        self.assert_backing_entries(snapshot, allow_orphans=False)
        if REAL_MOUNTS:
            self.assert_mounts()

    # -- calls and their predictions ---------------------------------------------------------

    def call_for(self, op: str | None, pick: int, size: int, flag: bool) -> Call | None:
        if op == "create":
            self.names += 1
            return self.create_call(f"pvc-{self.names}", size, 0, "striped", flag, flag, None)
        if op in ("consume", "release", "resize"):
            return self.knob_call(op, POOLS[pick % len(POOLS)].name, size)
        if op == "delete":
            return self.delete_call(pick, False)
        if not self.model.volumes:
            return None
        makers: dict[str, Callable[[], Call]] = {
            "expand": lambda: self.expand_call(pick, size),
            "controller_publish": lambda: self.controller_publish_call(pick),
            "controller_unpublish": lambda: self.controller_unpublish_call(pick),
            "stage": lambda: self.stage_call(pick, False),
            "publish": lambda: self.publish_call(pick, flag, False),
            "unpublish": lambda: self.unpublish_call(pick, flag),
            "unstage": lambda: self.unstage_call(pick, False),
        }
        if op == "controller_unpublish" and all(v.staged for v in self.model.volumes.values()):
            return None
        return makers[op]() if op else None

    def create_call(
        self,
        name: str,
        size: int,
        limit: int,
        kind: str,
        block: bool,
        multi_writer: bool,
        requisite: str | None,
    ) -> Call:
        after = self.model.copy()
        if limit and size > limit:
            code, placed = "OUT_OF_RANGE", None  # required_bytes above limit_bytes
        else:
            code, placed = after.create(name, size, limit, kind, block, requisite)
        new = placed is not None and placed.id == "?"
        if new:
            assert placed is not None
            placed.multi_writer = multi_writer
            after.volumes["?"] = placed  # known by name until the answer gives its ID
        request = pb.CreateVolumeRequest(
            name=name,
            capacity_range=pb.CapacityRange(required_bytes=size, limit_bytes=limit),
            volume_capabilities=[capability(block, multi_writer)],
            parameters={"kind": kind},
        )
        if requisite is not None:
            request.accessibility_requirements.requisite.append(
                pb.Topology(segments={NODE_KEY: requisite})
            )

        def adopt(response: pb.CreateVolumeResponse) -> None:
            assert placed is not None
            volume = response.volume
            assert volume.capacity_bytes == placed.size, volume
            assert volume.volume_context["csi-mock/pool"] == placed.pool, volume
            if new:
                placed.id = volume.volume_id
                placed.context = dict(volume.volume_context)
                after.volumes[placed.id] = after.volumes.pop("?")
            else:
                assert volume.volume_id == placed.id, volume

        return Call(
            label="create",
            run=lambda: self.driver.controller.CreateVolume(request, timeout=10),
            code=code,
            after=after,
            adopt=adopt if code == "OK" else None,
            send_future=lambda: self.driver.controller.CreateVolume.future(request, timeout=10),
        )

    def delete_call(self, pick: int, stale: bool) -> Call:
        if stale or not self.model.volumes:
            volume_id = self.deleted[pick % len(self.deleted)] if self.deleted else "vol-none"
        else:
            volume_id = self.pick(pick, lambda v: not v.attached).id
        after = self.model.copy()
        code = after.delete(volume_id)
        if code == "OK" and volume_id in self.model.volumes:
            self.deleted.append(volume_id)
        request = pb.DeleteVolumeRequest(volume_id=volume_id)
        return Call(
            label="delete",
            run=lambda: self.driver.controller.DeleteVolume(request, timeout=10),
            code=code,
            after=after,
            send_future=lambda: self.driver.controller.DeleteVolume.future(request, timeout=10),
        )

    def expand_call(self, pick: int | VolumeModel, size: int) -> Call:
        volume = self.pick(pick)
        after = self.model.copy()
        code = after.expand(volume.id, size)
        request = pb.ControllerExpandVolumeRequest(
            volume_id=volume.id,
            capacity_range=pb.CapacityRange(required_bytes=size),
            volume_capability=capability(volume.block, volume.multi_writer),
        )
        expected_size = after.volumes[volume.id].size

        def adopt(response: pb.ControllerExpandVolumeResponse) -> None:
            assert response.capacity_bytes == expected_size, response

        return Call(
            label="expand",
            run=lambda: self.driver.controller.ControllerExpandVolume(request, timeout=10),
            code=code,
            after=after,
            adopt=adopt if code == "OK" else None,
            send_future=lambda: self.driver.controller.ControllerExpandVolume.future(
                request, timeout=10
            ),
        )

    def controller_publish_call(self, pick: int | VolumeModel | VolumeModel) -> Call:
        volume = self.pick(pick, lambda v: not v.attached)
        after = self.model.copy()
        code = after.controller_publish(volume.id)
        request = pb.ControllerPublishVolumeRequest(
            volume_id=volume.id,
            node_id=NODE_ID,
            volume_capability=capability(volume.block, volume.multi_writer),
        )
        return Call(
            label="controller_publish",
            run=lambda: self.driver.controller.ControllerPublishVolume(request, timeout=10),
            code=code,
            after=after,
            send_future=lambda: self.driver.controller.ControllerPublishVolume.future(
                request, timeout=10
            ),
        )

    def controller_unpublish_call(
        self, pick: int | VolumeModel | VolumeModel | VolumeModel
    ) -> Call:
        # A CO detaches only what is no longer staged on the node.
        if isinstance(pick, VolumeModel):
            volume = self.pick(pick)
        else:
            candidates = [v for v in self.volumes() if v.staged is None]
            volume = candidates[pick % len(candidates)]
        after = self.model.copy()
        code = after.controller_unpublish(volume.id)
        request = pb.ControllerUnpublishVolumeRequest(volume_id=volume.id, node_id=NODE_ID)
        return Call(
            label="controller_unpublish",
            run=lambda: self.driver.controller.ControllerUnpublishVolume(request, timeout=10),
            code=code,
            after=after,
            send_future=lambda: self.driver.controller.ControllerUnpublishVolume.future(
                request, timeout=10
            ),
        )

    def stage_call(self, pick: int | VolumeModel, elsewhere: bool) -> Call:
        volume = self.pick(pick, lambda v: v.attached and v.staged is None)
        path = self.staging_path(volume, elsewhere)
        after = self.model.copy()
        code = after.stage(volume.id, path)
        request = pb.NodeStageVolumeRequest(
            volume_id=volume.id,
            staging_target_path=path,
            volume_capability=capability(volume.block, volume.multi_writer),
            publish_context=publish_context(volume),
            volume_context=volume.context,
        )
        return Call(
            label="stage",
            run=lambda: self.driver.node.NodeStageVolume(request, timeout=10),
            code=code,
            after=after,
            send_future=lambda: self.driver.node.NodeStageVolume.future(request, timeout=10),
        )

    def unstage_call(self, pick: int | VolumeModel | VolumeModel, elsewhere: bool) -> Call:
        volume = self.pick(pick, lambda v: v.staged is not None and not v.targets)
        path = self.staging_path(volume, elsewhere)
        after = self.model.copy()
        code = after.unstage(volume.id, path)
        request = pb.NodeUnstageVolumeRequest(volume_id=volume.id, staging_target_path=path)
        return Call(
            label="unstage",
            run=lambda: self.driver.node.NodeUnstageVolume(request, timeout=10),
            code=code,
            after=after,
            send_future=lambda: self.driver.node.NodeUnstageVolume.future(request, timeout=10),
        )

    def publish_call(self, pick: int | VolumeModel, second: bool, readonly: bool) -> Call:
        volume = self.pick(pick, lambda v: v.staged is not None)
        target = self.target_path(volume, second)
        staging = self.staging_path(volume, False)
        after = self.model.copy()
        code = after.publish(volume.id, target, staging, readonly)
        request = pb.NodePublishVolumeRequest(
            volume_id=volume.id,
            staging_target_path=staging,
            target_path=target,
            volume_capability=capability(volume.block, volume.multi_writer),
            readonly=readonly,
            publish_context=publish_context(volume),
            volume_context=volume.context,
        )
        return Call(
            label="publish",
            run=lambda: self.driver.node.NodePublishVolume(request, timeout=10),
            code=code,
            after=after,
            send_future=lambda: self.driver.node.NodePublishVolume.future(request, timeout=10),
        )

    def misdirected_publish_call(self, pick: int, where: str) -> Call:
        """NodePublish onto a symbolic link, below one, or into the driver's own state:
        INVALID_ARGUMENT where the call would otherwise succeed, and no mount anywhere
        (assert_mounts sees every mount below the root, the links' destination too)."""
        volume = self.pick(pick, lambda v: v.staged is not None)
        outside = self.root / "outside" / volume.name
        outside.mkdir(parents=True, exist_ok=True)
        if where == "state directory":
            target = self.driver.volumes_dir / volume.id / "mnt"
        else:
            link = self.root / "pods" / f"{volume.name}-link"
            if not link.is_symlink():
                link.symlink_to(outside)
            target = link if where == "link" else link / "below"
        staging = self.staging_path(volume, False)
        after = self.model.copy()
        code = after.publish(volume.id, str(target), staging, False)
        if where == "state directory" or code == "OK":
            code, after = "INVALID_ARGUMENT", self.model.copy()
        request = pb.NodePublishVolumeRequest(
            volume_id=volume.id,
            staging_target_path=staging,
            target_path=str(target),
            volume_capability=capability(volume.block, volume.multi_writer),
            publish_context=publish_context(volume),
            volume_context=volume.context,
        )
        return Call(
            label=f"publish onto {where}",
            run=lambda: self.driver.node.NodePublishVolume(request, timeout=10),
            code=code,
            after=after,
        )

    def unpublish_call(self, pick: int | VolumeModel | VolumeModel, second: bool) -> Call:
        volume = self.pick(pick, lambda v: bool(v.targets))
        target = self.target_path(volume, second)
        after = self.model.copy()
        code = after.unpublish(volume.id, target)
        request = pb.NodeUnpublishVolumeRequest(volume_id=volume.id, target_path=target)
        return Call(
            label="unpublish",
            run=lambda: self.driver.node.NodeUnpublishVolume(request, timeout=10),
            code=code,
            after=after,
            send_future=lambda: self.driver.node.NodeUnpublishVolume.future(request, timeout=10),
        )

    def knob_call(self, knob: str, pool: str, amount: int) -> Call:
        after = self.model.copy()
        admin = self.driver.admin_client
        if knob == "resize":
            status, run = after.resize_pool(pool, amount), lambda: admin.resize_pool(pool, amount)
        elif knob == "consume":
            status, run = after.consume(pool, amount), lambda: admin.consume(pool, amount)
        else:
            status, run = after.release(pool, amount), lambda: admin.release(pool, amount)
        return Call(run=run, code=str(status), after=after, admin=True, label=knob)

    # -- performing and checking ---------------------------------------------------------------

    last_answer: Any = None

    def outcome_of(self, call: Call) -> str:
        """The call's status: a gRPC code name, or an HTTP status for the admin API."""
        self.last_answer = None
        try:
            self.last_answer = call.run()
        except grpc.RpcError as error:
            return str(error.code().name)
        except AdminError as error:
            return str(error.status)
        return "200" if call.admin else "OK"

    def perform(self, call: Call | None) -> None:
        if call is None:
            return
        code = self.outcome_of(call)
        event(f"{call.label}: {code}")
        OUTCOMES[f"{call.label}: {code}"] += 1
        assert code == call.code, f"answered {code}, the model expected {call.code}"
        self.model = self.with_adopted(call, self.last_answer)

    def with_adopted(self, call: Call, answer: Any = None) -> DriverModel:
        """The model after the call succeeded (answer None: a new volume's ID unknown)."""
        if call.adopt is not None and answer is not None:
            call.adopt(answer)
        return call.after

    def pick(
        self, pick: int | VolumeModel, prefer: Callable[[VolumeModel], bool] | None = None
    ) -> VolumeModel:
        """A volume by index; four times in five one for which the call makes sense (a
        CO's order of calls), so that sequences get past the first precondition."""
        if isinstance(pick, VolumeModel):
            return self.model.volumes[pick.id]
        volumes = self.volumes()
        preferred = [v for v in volumes if prefer(v)] if prefer else []
        if preferred and pick % 5 != 4:
            return preferred[(pick // 5) % len(preferred)]
        return volumes[pick % len(volumes)]

    def volumes(self) -> list[VolumeModel]:
        return sorted(self.model.volumes.values(), key=lambda v: v.name)

    def staging_path(self, volume: VolumeModel, elsewhere: bool) -> str:
        return str(self.root / "staging" / (volume.name + ("-b" if elsewhere else "")))

    def target_path(self, volume: VolumeModel, second: bool) -> str:
        return str(self.root / "pods" / (volume.name + ("-2" if second else "-1")))

    def assert_store_is_one_of(self, snapshot: StoreSnapshot, models: list[DriverModel]) -> None:
        names = {v.id: v.name for v in snapshot.volumes.values()}
        seen = StoreView(
            volumes={
                v.name: (v.pool, v.kind, v.size, v.allocation, v.offset, v.access_type == "block")
                for v in snapshot.volumes.values()
            },
            pools={
                name: (
                    row.total if row.total is not None else SPECS[name].size,
                    row.used,
                    row.external,
                )
                for name, row in snapshot.pools.items()
            },
            attachments=frozenset(names[v] for v, node in snapshot.attachments if node == NODE_ID),
            stagings={names[v]: path for v, path in snapshot.stagings.items()},
            publications=frozenset((names[v], target) for v, target in snapshot.publications),
        )
        expected = [model.store_view() for model in models]
        assert seen in expected, f"database holds {seen}, the model expects one of {expected}"
        # Known IDs must be the recorded ones (a pending create's ID is not known yet).
        by_name = {v.name: v.id for v in snapshot.volumes.values()}
        for model in models:
            if model.store_view() == seen:
                for volume in model.volumes.values():
                    if volume.id != "?":
                        assert by_name[volume.name] == volume.id

    def assert_listed_is_one_of(self, models: list[DriverModel]) -> None:
        entries = self.driver.controller.ListVolumes(pb.ListVolumesRequest(), timeout=10).entries
        ids = [e.volume.volume_id for e in entries]
        assert len(ids) == len(set(ids)), f"ListVolumes lists a volume twice: {ids}"
        listed = {
            e.volume.volume_id: (
                e.volume.volume_context["csi-mock/pool"],
                e.volume.capacity_bytes,
                tuple(e.status.published_node_ids),
            )
            for e in entries
        }
        for model in models:
            known = {
                v.id: (v.pool, v.size, (NODE_ID,) if v.attached else ())
                for v in model.volumes.values()
                if v.id != "?"
            }
            pending = [v for v in model.volumes.values() if v.id == "?"]
            extra = {k: x for k, x in listed.items() if k not in known}
            if {k: x for k, x in listed.items() if k in known} == known and len(extra) == len(
                pending
            ):
                return
        raise AssertionError(f"ListVolumes shows {listed}, which no model outcome explains")

    def assert_pools_and_capacity(self) -> None:
        pools = {view.name: view for view in self.driver.admin_client.pools()}
        for name, pool in self.model.pools.items():
            view = pools[name]
            seen = (view.total, view.used, view.external, view.free)
            expected = (
                pool.total,
                pool.used(self.model.volumes),
                pool.external,
                pool.free(self.model.volumes),
            )
            assert seen == expected, f"pool {name}: (total, used, external, free) {seen}"
        for node in LOCATIONS:
            for kind in KIND_COST:
                request = pb.GetCapacityRequest(parameters={"kind": kind})
                if node is not None:
                    request.accessible_topology.CopyFrom(pb.Topology(segments={NODE_KEY: node}))
                answer = self.driver.controller.GetCapacity(request, timeout=10)
                seen_capacity = (
                    answer.available_capacity,
                    answer.maximum_volume_size.value,
                    answer.minimum_volume_size.value,
                )
                model = self.model.capacity(node, kind)
                expected_capacity = (model.available, model.maximum, model.minimum)
                assert seen_capacity == expected_capacity, (
                    f"GetCapacity({node}, {kind}) = {seen_capacity}, expected"
                    f" {expected_capacity} (frozen: {self.model.frozen is not None})"
                )

    def assert_backing_entries(self, snapshot: StoreSnapshot, *, allow_orphans: bool) -> None:
        """Every volume row has its backing entry (directory or sparse file of its size);
        entries without a row are allowed only while a crash's leftovers await load()."""
        directory = self.driver.volumes_dir
        deadline = time.monotonic() + 5
        while True:
            entries = {
                name.rsplit("/", 1)[-1]: directory / name for name in backing_entries(directory)
            }
            # Pending and retired entries are the driver's unfinished work (only a crash
            # leaves them); anything in lost+found is data that a row should have had.
            unfinished = {n for n in backing_entries(directory) if "/" in n}
            orphans = (set(entries) - set(snapshot.volumes)) | unfinished
            if allow_orphans or not orphans or time.monotonic() > deadline:
                break
            time.sleep(0.05)  # a removal after the commit may still be under way
        missing = set(snapshot.volumes) - set(entries)
        assert not missing, f"volume rows without backing entries: {sorted(missing)}"
        assert allow_orphans or not orphans, f"backing entries without rows: {sorted(orphans)}"
        for volume_id, row in snapshot.volumes.items():
            path = entries[volume_id]
            if row.access_type == "block":
                assert path.is_file() and path.stat().st_size >= row.size, (path, row)
            else:
                assert path.is_dir(), (path, row)

    def assert_mounts(self) -> None:
        root = os.path.realpath(self.root) + os.sep
        mounted = sorted(p for p in mount_points() if p.startswith(root))
        expected = sorted(
            [v.staged for v in self.model.volumes.values() if v.staged and not v.block]
            + [t for v in self.model.volumes.values() for t in v.targets]
        )
        assert mounted == expected, f"mounts {mounted}, expected {expected}"
        if KernelLoopDevices.available():
            backing = os.path.realpath(self.driver.volumes_dir) + os.sep
            attached = sorted(
                str(path)
                for path in KernelLoopDevices().attached().values()
                if str(path).startswith(backing)
            )
            wanted = sorted(
                os.path.realpath(self.driver.volumes_dir / v.id)
                for v in self.model.volumes.values()
                if v.block and v.targets
            )
            assert attached == wanted, f"loop devices over {attached}, expected {wanted}"

    # -- back to the initial state between examples ---------------------------------------------

    def teardown(self) -> None:
        """Undo everything through the API, so the next example starts from scratch on
        the same driver (a start costs seconds); wipe and restart if that fails."""
        try:
            if self.driver.process is None:
                self.driver.start()
            admin = self.driver.admin_client
            admin.unfreeze_capacity()
            for volume in self.volumes():
                for target in list(volume.targets):
                    self.driver.node.NodeUnpublishVolume(
                        pb.NodeUnpublishVolumeRequest(volume_id=volume.id, target_path=target)
                    )
                if volume.staged:
                    self.driver.node.NodeUnstageVolume(
                        pb.NodeUnstageVolumeRequest(
                            volume_id=volume.id, staging_target_path=volume.staged
                        )
                    )
                self.driver.controller.ControllerUnpublishVolume(
                    pb.ControllerUnpublishVolumeRequest(volume_id=volume.id, node_id=NODE_ID)
                )
                self.driver.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume.id))
            for view in admin.pools():
                if view.external:
                    admin.release(view.name, view.external)
                admin.resize_pool(view.name, SPECS[view.name].size)
            self.model = DriverModel()
            self.everything_agrees_with_the_model()
        except BaseException:
            reset_driver(self.driver, self.root)
            raise


def capability(block: bool, multi_writer: bool) -> pb.VolumeCapability:
    mode = Mode.SINGLE_NODE_MULTI_WRITER if multi_writer else Mode.SINGLE_NODE_WRITER
    access = Mode(mode=mode)
    if block:
        return pb.VolumeCapability(block=pb.VolumeCapability.BlockVolume(), access_mode=access)
    return pb.VolumeCapability(mount=pb.VolumeCapability.MountVolume(), access_mode=access)


def publish_context(volume: VolumeModel) -> dict[str, str]:
    """What ControllerPublishVolume answered, as the CO passes it on; empty if detached."""
    if not volume.attached:
        return {}
    return {"csi-mock/attached-node": NODE_ID, "csi-mock/device": f"/dev/mock/{volume.id}"}


def reset_driver(driver: DriverProcess, root: Path) -> None:
    """Kill the driver, remove its mounts, loop devices and state, start it afresh."""
    if driver.process is not None:
        driver.kill()
    release_host_resources(root)
    shutil.rmtree(driver.state_dir, ignore_errors=True)
    for directory in ("staging", "pods"):
        shutil.rmtree(root / directory, ignore_errors=True)
    driver.start()


def release_host_resources(root: Path) -> None:
    prefix = os.path.realpath(root) + os.sep
    for point in sorted({p for p in mount_points() if p.startswith(prefix)}, reverse=True):
        while point in mount_points():
            subprocess.run(["umount", "-l", point], check=True)
    if KernelLoopDevices.available():
        loops = KernelLoopDevices()
        for backing in {p for p in loops.attached().values() if str(p).startswith(prefix)}:
            loops.detach(backing)


@pytest.fixture(params=[0, 2], ids=["alone", "with-two-siblings"])
def machine_driver(short_tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[DriverProcess]:
    """The driver under test; with siblings, two more instances in its process."""
    log = os.environ.get("CSI_MOCK_STATEFUL_LOG")
    driver = DriverProcess(
        short_tmp_path, driver_config(), Path(log) if log else None, siblings=request.param
    )
    driver.start()
    try:
        yield driver
    finally:
        driver.stop()
        release_host_resources(short_tmp_path)


@pytest.mark.slow
def test_random_call_sequences_keep_model_database_files_and_mounts_in_agreement(
    machine_driver: DriverProcess, short_tmp_path: Path
) -> None:
    DriverMachine.driver = machine_driver
    DriverMachine.root = short_tmp_path
    OUTCOMES.clear()
    started = time.monotonic()
    # Beside two sibling instances, a third of the examples: the machine is the same.
    examples = EXAMPLES if not machine_driver.sibling_roots else max(EXAMPLES // 3, 2)
    run_state_machine_as_test(
        DriverMachine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=STEPS,
            derandomize=True,  # a fixed seed: CI runs the same sequences every time
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            print_blob=True,
        ),
    )
    # The siblings were killed and restarted with it, and saw none of its calls.
    for sibling in machine_driver.sibling_roots:
        left = read_store(sibling / "state" / "state.db")
        assert not left.volumes and not left.attachments and not left.publications, sibling
    print(
        f"stateful profile {PROFILE}: {examples} examples x {STEPS} steps in"
        f" {time.monotonic() - started:.1f} s; answers: {dict(sorted(OUTCOMES.items()))}"
    )
