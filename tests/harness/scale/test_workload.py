"""The burst: seeded sizes, pod manifests, and bad size arguments."""

from __future__ import annotations

import time
from typing import Any

import pytest

from csi_harness._internal.kube.objects import NODE_TYPE_LABEL
from csi_harness._internal.scale.workload import (
    BUSY_NAMESPACE,
    DEPLOYMENT_LABEL,
    VOLUME,
    Burst,
    SizeRange,
    WorkloadError,
    WorkloadKind,
    busy_pods,
    create_paced,
    creation_offsets,
    fill_ratio,
)

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


def test_the_baseline_has_the_same_pods_without_volumes_and_asks_for_nothing() -> None:
    with_volumes = burst(pods=3)
    baseline = Burst(3, SizeRange.parse("1Gi-3Gi"), 1, "csi-mock", "scale", volumes=False)
    assert baseline.total_bytes() == 0
    pods = baseline.manifests()
    assert [p["metadata"]["name"] for p in pods] == [
        p["metadata"]["name"] for p in with_volumes.manifests()
    ]
    assert all(p["spec"]["volumes"] == [] for p in pods)
    assert all(p["spec"]["containers"][0]["volumeMounts"] == [] for p in pods)


def test_deployments_have_one_replica_whose_template_is_the_pod_with_its_volume() -> None:
    kind = WorkloadKind.DEPLOYMENTS
    deployments = Burst(2, SizeRange.parse("1Gi"), 1, "csi-mock", "scale", kind=kind).manifests()
    pods = burst(pods=2, sizes="1Gi").manifests()
    for deployment, pod in zip(deployments, pods, strict=True):
        assert deployment["kind"] == "Deployment" and deployment["apiVersion"] == "apps/v1"
        assert deployment["metadata"]["name"] == pod["metadata"]["name"]
        assert deployment["metadata"]["namespace"] == "scale"
        spec = deployment["spec"]
        assert spec["replicas"] == 1
        assert spec["template"]["spec"] == pod["spec"]
        # The selector picks this Deployment's pod only.
        selector = spec["selector"]["matchLabels"]
        assert selector.items() <= spec["template"]["metadata"]["labels"].items()
        assert selector == {DEPLOYMENT_LABEL: pod["metadata"]["name"]}
        (volume,) = spec["template"]["spec"]["volumes"]
        assert volume["name"] == VOLUME
        claim = volume["ephemeral"]["volumeClaimTemplate"]["spec"]
        assert claim["resources"]["requests"]["storage"] == str(GI)


def test_objects_are_created_evenly_at_the_given_rate_or_all_at_once() -> None:
    assert creation_offsets(4, 10.0) == pytest.approx([0.0, 0.1, 0.2, 0.3])
    assert creation_offsets(3, None) == [0.0, 0.0, 0.0]


def test_a_rate_that_is_not_positive_is_refused_naming_the_option() -> None:
    with pytest.raises(WorkloadError, match="--create-qps: 0"):
        creation_offsets(3, 0)


def test_paced_creation_does_not_let_a_slow_answer_hold_back_the_next() -> None:
    created: list[tuple[str, float]] = []

    def slow_create(manifest: dict[str, Any]) -> None:
        time.sleep(0.3)
        created.append((manifest["name"], time.monotonic()))

    manifests = [{"name": str(i)} for i in range(10)]
    start = time.monotonic()
    create_paced(slow_create, manifests, creation_offsets(10, 100.0), start)
    # One after the other this takes 3 s; paced with parallel creators about 0.4 s.
    assert time.monotonic() - start < 2.0
    assert sorted(name for name, _ in created) == sorted(m["name"] for m in manifests)


def test_paced_creation_raises_the_first_failure_and_stops_creating() -> None:
    created: list[str] = []

    def create(manifest: dict[str, Any]) -> None:
        if manifest["name"] == "2":
            raise RuntimeError("refused")
        created.append(manifest["name"])

    manifests = [{"name": str(i)} for i in range(50)]
    with pytest.raises(RuntimeError, match="refused"):
        create_paced(create, manifests, creation_offsets(50, 100.0), time.monotonic())
    assert len(created) < 49


def test_without_a_rate_objects_are_created_one_after_the_other_in_order() -> None:
    created: list[str] = []
    manifests = [{"name": str(i)} for i in range(5)]
    create_paced(lambda m: created.append(m["name"]), manifests, creation_offsets(5, None), 0.0)
    assert created == ["0", "1", "2", "3", "4"]


def test_busy_pods_are_bound_to_their_nodes_and_ask_for_half_of_each() -> None:
    made = busy_pods(["node-2", "node-3"], {"cpu": "4", "memory": "8Gi", "pods": "110"})
    assert [p["spec"]["nodeName"] for p in made] == ["node-2", "node-3"]
    assert {p["metadata"]["namespace"] for p in made} == {BUSY_NAMESPACE}
    assert all(p["spec"]["volumes"] == [] for p in made)
    (container,) = made[0]["spec"]["containers"]
    assert container["resources"]["requests"] == {"cpu": "2000m", "memory": "4Gi"}
