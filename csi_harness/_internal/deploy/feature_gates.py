"""Feature gates of the CSI sidecars (``--feature-gates=A=true,B=false``), checked before
a sidecar would refuse to start with them."""

from __future__ import annotations

import re

SIDECARS_WITH_GATES = ("csi-provisioner", "csi-attacher", "csi-resizer", "csi-snapshotter")
_GATE_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")

SidecarFeatureGates = dict[str, dict[str, bool]]
"""Sidecar name -> gate name -> on/off."""

REMOVED_GATES: dict[tuple[str, str], str] = {
    ("csi-provisioner", "HonorPVReclaimPolicy"): (
        "GA and removed: the pinned csi-provisioner (v6.3.0) always honours the PV reclaim"
        " policy and exits with 'unrecognized feature gate: HonorPVReclaimPolicy'"
    ),
    ("csi-resizer", "RecoverVolumeExpansionFailure"): (
        "GA and removed: the pinned csi-resizer (v2.3.0) always recovers from expansion"
        " failure and exits with 'unrecognized feature gate: RecoverVolumeExpansionFailure'"
    ),
}
"""Gates upstream's csimock suites set that the pinned sidecars no longer know (measured
with their --feature-gates): refused here with the reason instead of a sidecar that does
not start."""


def check_feature_gates(gates: SidecarFeatureGates) -> SidecarFeatureGates:
    for sidecar, named in gates.items():
        if sidecar not in SIDECARS_WITH_GATES:
            raise ValueError(
                f"{sidecar!r} is not a sidecar with feature gates"
                f" ({', '.join(SIDECARS_WITH_GATES)})"
            )
        for gate in named:
            if not _GATE_NAME.match(gate):
                raise ValueError(f"{sidecar}: {gate!r} is not a feature gate name")
            removed = REMOVED_GATES.get((sidecar, gate))
            if removed is not None:
                raise ValueError(f"{sidecar}: {gate}: {removed}")
    return gates


def feature_gate_flags(gates: SidecarFeatureGates, sidecar: str) -> list[str]:
    """The sidecar's ``--feature-gates`` flag (gates in name order), or none."""
    named = gates.get(sidecar)
    if not named:
        return []
    value = ",".join(f"{gate}={str(on).lower()}" for gate, on in sorted(named.items()))
    return [f"--feature-gates={value}"]
