"""The burst: seeded sizes, pod manifests, and bad size arguments."""

from __future__ import annotations

import pytest

from csi_harness._internal.kube.objects import NODE_TYPE_LABEL
from csi_harness._internal.scale.workload import VOLUME, Burst, SizeRange, WorkloadError, fill_ratio

GI = 1 << 30
MI = 1 << 20


def burst(pods: int = 20, sizes: str = "1Gi-3Gi", seed: int = 1) -> Burst:
    return Burst(pods, SizeRange.parse(sizes), seed, "csi-mock", "scale")


def test_a_single_size_is_fixed() -> None:
    sizes = SizeRange.parse("1Gi")
    assert (sizes.low, sizes.high, sizes.fixed) == (GI, GI, True)
    assert str(sizes) == "1Gi"


def test_a_range_steps_by_its_lower_bound_when_that_divides_it() -> None:
    assert SizeRange.parse("1Gi-3Gi") == SizeRange(GI, 3 * GI, GI)
    assert SizeRange.parse("512Mi-2Gi") == SizeRange(512 * MI, 2 * GI, 512 * MI)


def test_a_range_takes_an_explicit_step() -> None:
    assert SizeRange.parse("1Gi-2Gi/256Mi") == SizeRange(GI, 2 * GI, 256 * MI)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "is not SIZE"),
        ("big", "is not a quantity"),
        ("0", "must be positive"),
        ("3Gi-1Gi", "upper bound is below"),
        ("1Gi-2Gi/300Mi", "step must divide"),
    ],
)
def test_bad_sizes_name_the_option(text: str, problem: str) -> None:
    with pytest.raises(WorkloadError, match=problem) as error:
        SizeRange.parse(text)
    assert str(error.value).startswith("--size")


def test_the_same_seed_gives_the_same_sizes_and_another_seed_others() -> None:
    first = burst(seed=7).volume_sizes()
    assert first == burst(seed=7).volume_sizes()
    assert first != burst(seed=8).volume_sizes()
    assert set(first) <= {GI, 2 * GI, 3 * GI}
    assert len(set(first)) > 1


def test_pods_get_one_ephemeral_volume_of_their_size_on_simulated_nodes_only() -> None:
    b = burst(pods=3)
    pods = b.manifests()
    assert [p["metadata"]["name"] for p in pods] == [Burst.pod_name(i) for i in range(3)]
    for pod, size in zip(pods, b.volume_sizes(), strict=True):
        (volume,) = pod["spec"]["volumes"]
        assert volume["name"] == VOLUME
        spec = volume["ephemeral"]["volumeClaimTemplate"]["spec"]
        assert spec["resources"]["requests"]["storage"] == str(size)
        assert spec["storageClassName"] == "csi-mock"
        assert pod["spec"]["nodeSelector"] == {NODE_TYPE_LABEL: "simulated"}
        assert pod["metadata"]["namespace"] == "scale"
    assert Burst.claim_name(2) == f"burst-00002-{VOLUME}"


def test_fill_ratio_is_the_share_of_all_pools_asked_for() -> None:
    b = burst(pods=9, sizes="1Gi")
    assert fill_ratio(b, 10 * GI, 1) == pytest.approx(0.9)


def test_a_burst_needs_pods() -> None:
    with pytest.raises(WorkloadError, match="--pods"):
        burst(pods=0)
