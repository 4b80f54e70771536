"""The offline kind node image: the pieces that need no Docker engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from csi_harness._internal.core.image_archive import LayerEntry
from csi_harness._internal.providers.kind import node_image
from csi_harness._internal.providers.kind.node_image import NodeImageError


def test_without_a_docker_cli_the_error_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NodeImageError, match=r"no docker CLI.*engine\.sh start"):
        node_image.require_docker()


def test_with_an_engine_that_does_not_answer_the_error_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docker = tmp_path / "docker"
    docker.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NodeImageError, match=r"does not answer.*engine\.sh start") as raised:
        node_image.require_docker()
    assert "Cannot connect to the Docker daemon" in str(raised.value)


def test_layers_carry_every_parent_directory_once() -> None:
    entries = node_image._with_parents(
        [
            LayerEntry("usr/local/bin/kube-proxy", 0o755, b"x"),
            LayerEntry("usr/sbin/iptables", 0o777, link_target="xtables-nft-multi"),
            LayerEntry("usr", 0o755, directory=True),
        ]
    )
    paths = [e.path for e in entries]
    assert sorted(paths) == sorted(
        [
            "usr",
            "usr/local",
            "usr/local/bin",
            "usr/local/bin/kube-proxy",
            "usr/sbin",
            "usr/sbin/iptables",
        ]
    )
    assert len(paths) == len(set(paths))


def test_the_containerd_settings_this_vm_needs_are_patched_into_kinds_config(
    tmp_path: Path,
) -> None:
    kind_config = node_image.kind_module_dir() / "images/base/files/etc/containerd/config.toml"
    root = tmp_path / "root"
    (root / "etc/containerd").mkdir(parents=True)
    (root / "etc/containerd/config.toml").write_text(kind_config.read_text())

    class FakeTools:
        def __getitem__(self, name: str) -> str:
            assert name == "ctr"
            return str(tmp_path / "ctr")

    ctr = tmp_path / "ctr"
    ctr.write_text('#!/bin/sh\necho \'{"process": {"rlimits": [1]}, "hooks": {}}\'\n')
    ctr.chmod(0o755)
    node_image._configure_containerd(
        FakeTools(),  # type: ignore[arg-type]
        root,
        ["registry.k8s.io/kube-apiserver:v1.37.1", "registry.k8s.io/pause:3.10.1"],
    )
    text = (root / "etc/containerd/config.toml").read_text()
    assert "restrict_oom_score_adj = true" in text
    assert 'sandbox_image = "registry.k8s.io/pause:3.10.1"' in text
    spec = (root / "etc/containerd/cri-base.json").read_text()
    assert "mount-product-files.sh" in spec and "rlimits" not in spec


def test_only_the_offline_node_image_itself_gets_images_baked_in() -> None:
    offline = f"{node_image.IMAGE_REPOSITORY}:v1.37.1-e684af75e303"
    assert node_image.is_offline_node_image(offline)
    assert not node_image.is_offline_node_image(f"{offline}-images-2d0890107f5e")
    assert not node_image.is_offline_node_image("kindest/node:v1.37.1")
    assert not node_image.is_offline_node_image("registry.example.com/csi-mock.local/kind-node:x")
