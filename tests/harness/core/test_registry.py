"""What the registry's log says was pulled, and where a mirror keeps each name."""

from __future__ import annotations

from csi_harness._internal.core.registry import pulls
from csi_harness._internal.deploy.image_push import mirror_paths

LOG = """2026/11/28 05:01:02 GET /v2/
2026/11/28 05:01:03 HEAD /v2/registry.k8s.io/sig-storage/csi-provisioner/manifests/v6.3.0
2026/11/28 05:01:03 GET /v2/registry.k8s.io/sig-storage/csi-provisioner/manifests/v6.3.0
2026/11/28 05:01:04 GET /v2/library/busybox/manifests/1.37.0
2026/11/28 05:01:04 GET /v2/library/busybox/blobs/sha256:abc
"""


def test_pulls_are_the_manifest_gets_by_path_and_tag() -> None:
    assert pulls(LOG) == [
        "registry.k8s.io/sig-storage/csi-provisioner:v6.3.0",
        "library/busybox:1.37.0",
    ]


def test_docker_hub_names_live_at_the_root_and_under_docker_io() -> None:
    assert mirror_paths("docker.io/library/busybox:1.37.0") == [
        "library/busybox:1.37.0",
        "docker.io/library/busybox:1.37.0",
    ]
    assert mirror_paths("registry.k8s.io/sig-storage/x:v1") == ["registry.k8s.io/sig-storage/x:v1"]


def test_a_mirrors_namespace_query_is_not_part_of_the_name() -> None:
    line = "GET /v2/registry.k8s.io/sig-storage/x/manifests/v1?ns=registry.k8s.io"
    assert pulls(line) == ["registry.k8s.io/sig-storage/x:v1"]


def test_pulls_count_only_what_came_after_the_last_push(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from csi_harness._internal.core.registry import mark_pushed, pushed_until

    assert pushed_until(tmp_path) is None
    mark_pushed(tmp_path)
    stamp = pushed_until(tmp_path)
    assert stamp is not None and stamp.endswith("Z") and "T" in stamp
