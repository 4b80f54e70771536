"""What a wait for a VolumeSnapshot's deletion says it saw: what holds the snapshot, and
which controller's part of the deletion is not done."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from csi_harness._internal.kube import snapshots
from csi_harness._internal.kube.snapshots import BEING_CREATED, BEING_DELETED, snapshot_deleted
from tests.harness.kube.test_watching import api_error

BOUND = "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"
CONTENT_BOUND = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"


@dataclass
class Objects:
    """Answers gets from the objects it holds; a missing one is a 404."""

    held: dict[tuple[Any, str], Any] = field(default_factory=dict)

    def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Any:
        try:
            return self.held[(resource, name)]
        except KeyError:
            raise api_error(404, f"{name} not found") from None


def snapshot(content: str | None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "snap",
            "deletionTimestamp": "2026-11-30T18:23:40Z",
            "finalizers": [BOUND],
        },
        "status": {"boundVolumeSnapshotContentName": content} if content else {},
    }


def content(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "snapcontent-1",
            "deletionTimestamp": "2026-11-30T18:23:20Z",
            "finalizers": [CONTENT_BOUND],
            "annotations": annotations,
        },
        "status": {"readyToUse": True, "snapshotHandle": "snap-1"},
    }


def test_a_gone_snapshot_ends_the_wait() -> None:
    done, _ = snapshot_deleted(Objects(), "snap", "ns")  # type: ignore[arg-type]

    assert done


def test_a_content_still_marked_being_created_is_named_as_what_holds_the_snapshot() -> None:
    kube = Objects(
        {
            (snapshots.VolumeSnapshot, "snap"): snapshot("snapcontent-1"),
            (snapshots.VolumeSnapshotContent, "snapcontent-1"): content(
                {BEING_CREATED: "yes", BEING_DELETED: "yes", "other": "x"}
            ),
        }
    )

    done, seen = snapshot_deleted(kube, "snap", "ns")  # type: ignore[arg-type]

    assert not done
    assert f"finalizers=['{BOUND}']" in seen
    assert "its content snapcontent-1: deletionTimestamp=2026-11-30T18:23:20Z" in seen
    assert f"finalizers=['{CONTENT_BOUND}']" in seen
    assert "marked volumesnapshot-being-created, volumesnapshot-being-deleted" in seen
    assert "snapshotHandle=snap-1" in seen


def test_a_content_already_gone_says_so() -> None:
    kube = Objects({(snapshots.VolumeSnapshot, "snap"): snapshot("snapcontent-1")})

    done, seen = snapshot_deleted(kube, "snap", "ns")  # type: ignore[arg-type]

    assert not done
    assert seen.endswith("its content snapcontent-1 is gone")


def test_an_unmarked_content_and_an_unbound_snapshot_are_told_apart() -> None:
    unbound = Objects({(snapshots.VolumeSnapshot, "snap"): snapshot(None)})
    unmarked = Objects(
        {
            (snapshots.VolumeSnapshot, "snap"): snapshot("snapcontent-1"),
            (snapshots.VolumeSnapshotContent, "snapcontent-1"): content({}),
        }
    )

    _, unbound_seen = snapshot_deleted(unbound, "snap", "ns")  # type: ignore[arg-type]
    _, unmarked_seen = snapshot_deleted(unmarked, "snap", "ns")  # type: ignore[arg-type]

    assert "content" not in unbound_seen
    assert "marked neither being-created nor being-deleted" in unmarked_seen
