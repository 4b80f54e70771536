"""The one factory from options to provider: every bad option names itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from csi_harness._internal.core.run_state import STATE_FILE
from csi_harness._internal.providers.factory import (
    ClusterOptionError,
    ClusterOptions,
    drivers_handed_over,
    open_provider,
    session_images,
)
from csi_harness._internal.providers.local.provider import LocalProvider


def option_error(options: ClusterOptions) -> ClusterOptionError:
    with pytest.raises(ClusterOptionError) as caught:
        open_provider(options)
    return caught.value


def test_the_local_provider_is_the_default_and_builds_its_images() -> None:
    provider = open_provider(ClusterOptions(name="factory-test"))
    assert isinstance(provider, LocalProvider)
    assert provider.config.name == "factory-test"
    assert session_images(ClusterOptions()).source.kind == "built"


def test_kind_and_existing_clusters_pull_upstream_images_by_default() -> None:
    assert session_images(ClusterOptions(provider="kind")).source.kind == "upstream"
    assert session_images(ClusterOptions(provider="existing")).source.kind == "upstream"


@pytest.mark.parametrize(
    ("options", "option"),
    [
        (ClusterOptions(provider="nope"), "provider"),
        (ClusterOptions(images="upstream"), "images"),
        (ClusterOptions(images="upstrem", provider="kind"), "images"),
        (ClusterOptions(driver_image="x/csi-mock:1"), "driver_image"),
        (ClusterOptions(node_image="kindest/node:v1.37.1"), "node_image"),
        (ClusterOptions(registry_mirror="r:5000"), "registry_mirror"),
        (ClusterOptions(kubeconfig=Path("/nonexistent")), "kubeconfig"),
        (ClusterOptions(feature_gates="CSIVolumeHealth"), "feature_gates"),
    ],
)
def test_an_option_that_does_not_fit_names_itself(options: ClusterOptions, option: str) -> None:
    assert option_error(options).option == option


def test_an_existing_cluster_that_pulls_needs_csi_mocks_image(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    error = option_error(ClusterOptions(provider="existing", kubeconfig=kubeconfig))
    assert error.option == "driver_image"
    assert "csi-harness images push --registry" in error.message


def test_drivers_are_handed_between_processes_on_kind_and_existing_clusters_only(
    tmp_path: Path,
) -> None:
    existing = tmp_path / "existing" / "kubeconfig"
    local = tmp_path / "local" / "kubeconfig"
    for kubeconfig in (existing, local):
        kubeconfig.parent.mkdir()
        kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    (local.parent / STATE_FILE).write_text("{}")
    assert drivers_handed_over(ClusterOptions(provider="kind"))
    assert drivers_handed_over(ClusterOptions(provider="existing", kubeconfig=existing))
    assert not drivers_handed_over(ClusterOptions())
    # Attached to the local cluster beside its kubeconfig, or to the running one.
    assert not drivers_handed_over(ClusterOptions(provider="existing", kubeconfig=local))
    assert not drivers_handed_over(ClusterOptions(provider="existing"))
