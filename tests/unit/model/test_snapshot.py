"""Snapshot accounting: what a snapshot takes from its pool, and when it is ready."""

from csi_mock.model.kind import VolumeKind
from csi_mock.model.snapshot import Snapshot, SnapshotAccounting
from csi_mock.model.volume import AccessType

MI = 2**20
STRIPED = VolumeKind("striped")
MIRRORED = VolumeKind("mirrored", 2)


def test_full_accounting_charges_the_source_volumes_allocation() -> None:
    assert SnapshotAccounting.FULL.charge(200 * MI, 3 * MI, MIRRORED) == 200 * MI


def test_used_accounting_charges_the_data_held_times_the_kinds_cost() -> None:
    assert SnapshotAccounting.USED.charge(200 * MI, 3 * MI, MIRRORED) == 6 * MI
    assert SnapshotAccounting.USED.charge(100 * MI, 3 * MI, STRIPED) == 3 * MI


def test_used_accounting_never_charges_more_than_a_full_snapshot() -> None:
    # A mount volume without a quota can hold more than its size.
    assert SnapshotAccounting.USED.charge(100 * MI, 300 * MI, STRIPED) == 100 * MI


def test_used_accounting_of_an_empty_volume_charges_nothing() -> None:
    assert SnapshotAccounting.USED.charge(100 * MI, 0, STRIPED) == 0


def test_copy_on_write_accounting_charges_nothing() -> None:
    assert SnapshotAccounting.COPY_ON_WRITE.charge(100 * MI, 50 * MI, MIRRORED) == 0


def test_only_used_accounting_needs_the_sources_usage() -> None:
    assert [a for a in SnapshotAccounting if a.needs_usage] == [SnapshotAccounting.USED]


def test_a_snapshot_is_ready_to_use_from_its_ready_time_on() -> None:
    snapshot = Snapshot(
        id="snap-1",
        name="s",
        source_volume_id="vol-1",
        pool="p",
        kind="striped",
        size=MI,
        charge=MI,
        offset=0,
        access_type=AccessType.MOUNT,
        created_at=100.0,
        ready_at=105.0,
    )
    assert not snapshot.ready_to_use(104.9)
    assert snapshot.ready_to_use(105.0)
