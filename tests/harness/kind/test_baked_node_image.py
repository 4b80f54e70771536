"""Baking the suites' images into the node image: what goes into the added layer and
what names it (the parts that need no Docker engine)."""

from __future__ import annotations

import os
from pathlib import Path

from csi_harness._internal.providers.kind.baked_node_image import (
    baked_key,
    changed_paths,
    snapshot,
)


def _tree(root: Path) -> None:
    blobs = root / "var/lib/containerd/content/blobs"
    blobs.mkdir(parents=True)
    (blobs / "kept").write_bytes(b"kept")
    (blobs / "rewritten").write_bytes(b"old")
    (blobs / "collected").write_bytes(b"garbage")
    (root / "var/lib/containerd/link").symlink_to("content")


def test_the_layer_holds_what_the_import_added_or_changed_parents_first(tmp_path: Path) -> None:
    _tree(tmp_path)
    base = "var/lib/containerd"
    before = snapshot(tmp_path, base)
    blobs = tmp_path / base / "content/blobs"
    (blobs / "rewritten").write_bytes(b"new content")
    (blobs / "collected").unlink()
    (tmp_path / base / "snapshots/1").mkdir(parents=True)
    (tmp_path / base / "snapshots/1/file").write_bytes(b"x")
    (tmp_path / base / "link").unlink()
    (tmp_path / base / "link").symlink_to("snapshots")

    changes = changed_paths(before, snapshot(tmp_path, base))

    new_dirs = [f"{base}/snapshots", f"{base}/snapshots/1", f"{base}/snapshots/1/file"]
    for path in [f"{base}/content/blobs/rewritten", f"{base}/link", *new_dirs]:
        assert path in changes
    assert f"{base}/content/blobs/kept" not in changes
    # A layer cannot remove what the import's garbage collection removed: not listed.
    assert f"{base}/content/blobs/collected" not in changes
    assert changes.index(new_dirs[0]) < changes.index(new_dirs[1]) < changes.index(new_dirs[2])


def test_a_file_rewritten_with_the_same_size_counts_as_changed(tmp_path: Path) -> None:
    _tree(tmp_path)
    base = "var/lib/containerd"
    before = snapshot(tmp_path, base)
    path = tmp_path / base / "content/blobs/rewritten"
    path.write_bytes(b"OLD")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))

    assert changed_paths(before, snapshot(tmp_path, base)) == [f"{base}/content/blobs/rewritten"]


def test_nothing_changed_means_an_empty_layer(tmp_path: Path) -> None:
    _tree(tmp_path)
    before = snapshot(tmp_path, "var/lib/containerd")
    assert changed_paths(before, snapshot(tmp_path, "var/lib/containerd")) == []


def test_the_key_changes_with_every_input_and_only_then() -> None:
    inputs = ("recipe", "sha256:node", [("busybox-ab.tar", 10)], ["sha256:driver"])
    key = baked_key(*inputs)
    assert key == baked_key(*inputs)
    variants = [
        ("recipe 2", *inputs[1:]),
        (inputs[0], "sha256:other", *inputs[2:]),
        (*inputs[:2], [("busybox-cd.tar", 10)], inputs[3]),
        (*inputs[:2], [("busybox-ab.tar", 11)], inputs[3]),
        (*inputs[:3], ["sha256:driver2"]),
        (*inputs[:3], []),
    ]
    keys = {baked_key(*variant) for variant in variants}  # type: ignore[arg-type]
    assert key not in keys and len(keys) == len(variants)
