"""Sidecar feature gates: on the command line of the sidecar they are for, wherever it
runs, and refused naming the field before a sidecar would refuse to start."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from csi_harness._internal.deploy.sidecars import (
    attacher_flags,
    provisioner_flags,
    resizer_flags,
    snapshot_controller_flags,
    snapshotter_flags,
)
from csi_harness._internal.deploy.spec import DriverDeployment

GATES = {
    "csi-provisioner": {"VolumeAttributesClass": True, "CrossNamespaceVolumeDataSource": False},
    "csi-resizer": {"VolumeAttributesClass": False},
}


def gate_flags(flags: list[str]) -> list[str]:
    return [flag for flag in flags if flag.startswith("--feature-gates")]


def test_no_feature_gates_by_default() -> None:
    spec = DriverDeployment()

    assert gate_flags(provisioner_flags(spec, capacity_ownerref_level=-1)) == []
    assert gate_flags(resizer_flags(spec)) == []


def test_each_sidecar_gets_its_own_gates_in_name_order() -> None:
    spec = DriverDeployment(sidecar_feature_gates=GATES)

    assert gate_flags(provisioner_flags(spec, capacity_ownerref_level=-1)) == [
        "--feature-gates=CrossNamespaceVolumeDataSource=false,VolumeAttributesClass=true"
    ]
    assert gate_flags(resizer_flags(spec)) == ["--feature-gates=VolumeAttributesClass=false"]
    assert gate_flags(attacher_flags(spec)) == []
    assert gate_flags(snapshotter_flags(spec)) == []


@pytest.mark.parametrize(
    "gates",
    [
        {"csi-provisioner": {"HonorPVReclaimPolicy": True}},
        {"csi-resizer": {"RecoverVolumeExpansionFailure": True}},
        {"external-provisioner": {"Gate": True}},
        {"csi-resizer": {"not a gate": True}},
        {"csi-resizer": {"Gate": "yes please"}},
    ],
)
def test_a_gate_a_sidecar_would_refuse_is_refused_naming_the_field(
    gates: dict[str, Any],
) -> None:
    with pytest.raises(ValidationError) as raised:
        DriverDeployment(sidecar_feature_gates=gates)

    assert raised.value.errors()[0]["loc"][0] == "sidecar_feature_gates"


def test_a_removed_gate_is_refused_with_the_reason() -> None:
    with pytest.raises(ValidationError, match="always honours the PV reclaim policy"):
        DriverDeployment(sidecar_feature_gates={"csi-provisioner": {"HonorPVReclaimPolicy": True}})


def test_the_snapshot_controller_is_not_throttled_below_what_tests_at_the_same_time_ask() -> None:
    # At its defaults (5 QPS, burst 10) every request waited about 200 ms on kind.
    flags = snapshot_controller_flags()

    assert "--kube-api-qps=50" in flags and "--kube-api-burst=100" in flags


def test_the_snapshot_controller_looks_at_every_snapshot_again_within_seconds() -> None:
    # Its default resync is 15 minutes: a deletion it left half done would outlast a test.
    flags = snapshot_controller_flags()

    assert "--resync-period=20s" in flags
