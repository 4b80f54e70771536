"""The image sources every entry point takes, and the names each gives."""

from __future__ import annotations

import pytest

from csi_harness._internal.deploy.image_set import (
    BUSYBOX_BUILT,
    ImageSourceError,
    image_set,
    kind_node_image,
    parse_image_source,
    upstream_references,
)
from csi_harness._internal.deploy.images import SIDECARS, pinned_version


def test_upstream_names_every_sidecar_by_its_registry_k8s_io_name_at_the_pinned_version() -> None:
    images = image_set(parse_image_source("upstream"))
    version = pinned_version("csi-provisioner")
    assert images.sidecars["csi-provisioner"] == (
        f"registry.k8s.io/sig-storage/csi-provisioner:{version}"
    )
    assert set(images.sidecars) == set(SIDECARS)
    assert images.busybox == "docker.io/library/busybox:1.37.0"
    assert images.pull_policy == "IfNotPresent"


def test_built_keeps_the_local_names_and_never_pulls() -> None:
    images = image_set(parse_image_source("built"))
    assert images.busybox == BUSYBOX_BUILT
    assert all(name.startswith("csi-mock.local/") for name in images.sidecars.values())
    assert images.pull_policy == "Never"


@pytest.mark.parametrize(
    "prefix",
    ["mirror.example.com", "mirror.example.com:5000/k8s", "localhost:5001", "10.0.0.1:5000"],
)
def test_a_registry_prefix_puts_every_upstream_path_under_it(prefix: str) -> None:
    images = image_set(parse_image_source(prefix))
    for name, reference in upstream_references().items():
        expected = f"{prefix}/{reference}"
        assert (images.busybox if name == "busybox" else images.sidecars[name]) == expected


@pytest.mark.parametrize(
    "text", ["upstrem", "Built", "mirror.example.com/Upper", "host:99999", "a b", "", "http://x.io"]
)
def test_anything_else_is_refused_saying_what_is_accepted(text: str) -> None:
    with pytest.raises(ImageSourceError, match=r"built.*upstream.*registry prefix|out of range"):
        parse_image_source(text)


def test_the_stock_node_image_is_kindest_node_of_the_version() -> None:
    assert kind_node_image("v1.37.1") == "docker.io/kindest/node:v1.37.1"
