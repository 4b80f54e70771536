"""The kind configuration a run writes: CNI by the node image, mirrors, paths."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from csi_harness._internal.providers.kind.cluster_config import effective_config
from csi_harness._internal.providers.kind.registry_mirror import (
    CERTS_DIR,
    RegistryMirrorError,
    hosts_toml,
    parse_mirror_address,
)

CONFIG = """
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  disableDefaultCNI: true
nodes:
  - role: control-plane
    extraMounts:
      - hostPath: scheduler.yaml
        containerPath: /etc/scheduler.yaml
  - role: worker
"""


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "config" / "cluster.yaml"
    path.parent.mkdir()
    path.write_text(CONFIG)
    return path


def test_kinds_cni_is_kept_when_the_node_image_carries_it(source: Path, tmp_path: Path) -> None:
    config = effective_config(source, kind_cni=True, mirror=None, workdir=tmp_path)
    assert "networking" not in config


def test_the_harness_networks_pods_when_the_image_has_no_cni(source: Path, tmp_path: Path) -> None:
    config = effective_config(source, kind_cni=False, mirror=None, workdir=tmp_path)
    assert config["networking"] == {"disableDefaultCNI": True}


def test_without_the_images_coredns_is_left_out_and_kept_with_them(
    source: Path, tmp_path: Path
) -> None:
    # An image without kind's CNI (csi-mock's offline one) has no CoreDNS image either:
    # a CoreDNS pod would hold up every other image pull of its node.
    offline = effective_config(source, kind_cni=False, mirror=None, workdir=tmp_path)
    patches = [yaml.safe_load(p) for p in offline["kubeadmConfigPatches"]]
    skip = {"kind": "InitConfiguration", "skipPhases": ["preflight", "addon/coredns"]}
    assert skip in patches
    stock = effective_config(source, kind_cni=True, mirror=None, workdir=tmp_path)
    assert "addon/coredns" not in str(stock.get("kubeadmConfigPatches"))


def test_relative_mounts_stay_relative_to_the_original_file(source: Path, tmp_path: Path) -> None:
    config = effective_config(source, kind_cni=True, mirror=None, workdir=tmp_path)
    mount = config["nodes"][0]["extraMounts"][0]
    assert mount["hostPath"] == str(source.parent / "scheduler.yaml")


def test_a_mirror_is_mounted_into_every_node_and_read_by_containerd(
    source: Path, tmp_path: Path
) -> None:
    mirror = parse_mirror_address("csi-mock-registry:5000")
    config = effective_config(source, kind_cni=True, mirror=mirror, workdir=tmp_path)
    for node in config["nodes"]:
        assert {
            "hostPath": str(tmp_path / "certs.d"),
            "containerPath": CERTS_DIR,
            "readOnly": True,
        } in node["extraMounts"]
    assert any("config_path" in patch for patch in config["containerdConfigPatches"])
    hub = (tmp_path / "certs.d" / "docker.io" / "hosts.toml").read_text()
    assert '[host."http://csi-mock-registry:5000"]' in hub
    k8s = (tmp_path / "certs.d" / "registry.k8s.io" / "hosts.toml").read_text()
    assert '[host."http://csi-mock-registry:5000/v2/registry.k8s.io"]' in k8s
    assert "override_path = true" in k8s
    pushed = (tmp_path / "certs.d" / "localhost:5001" / "hosts.toml").read_text()
    assert '[host."http://csi-mock-registry:5000"]' in pushed
    yaml.safe_dump(config)  # writable as kind reads it


def test_hosts_toml_falls_back_to_the_registry_itself() -> None:
    text = hosts_toml("registry.k8s.io", parse_mirror_address("r:5000"))
    assert text.startswith('server = "https://registry.k8s.io"')


@pytest.mark.parametrize("text", ["csi-mock-registry", "r:0", "r:70000", "http://r:5000", ""])
def test_a_mirror_address_must_be_host_and_port(text: str) -> None:
    with pytest.raises(RegistryMirrorError, match="not HOST:PORT"):
        parse_mirror_address(text)
