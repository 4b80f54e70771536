"""The flags of the CSI sidecars, wherever they run (local processes or pods).

Only where a sidecar finds the driver and the API server differs between providers;
everything that shapes its behaviour towards the driver is said here, once.
"""

from __future__ import annotations

from csi_harness._internal.deploy.feature_gates import feature_gate_flags
from csi_harness._internal.deploy.spec import DriverDeployment

# Short timeouts and retries: a test waits for the outcome of every call, and the
# upstream defaults (a minute of backoff) would dominate its run time.
_RETRIES = ["--timeout=15s", "--retry-interval-start=500ms", "--retry-interval-max=5s"]


def provisioner_flags(spec: DriverDeployment, *, capacity_ownerref_level: int) -> list[str]:
    """external-provisioner's flags besides --csi-address and --kubeconfig.

    ``capacity_ownerref_level`` picks the owner of the CSIStorageCapacity objects along
    the provisioner pod's owner chain (-1: none, 0: the pod, 2: its Deployment).
    """
    return [
        # One replica: nothing to elect, and no lease to wait for after a redeploy.
        "--leader-election=false",
        f"--enable-capacity={str(spec.publish_capacity).lower()}",
        f"--capacity-ownerref-level={capacity_ownerref_level}",
        f"--capacity-poll-interval={spec.capacity_poll_interval}",
        # A test publishes a node x class matrix at once; the default QPS (5) spreads
        # that over seconds.
        "--kube-api-capacity-qps=50",
        "--kube-api-capacity-burst=100",
        "--extra-create-metadata",
        *(
            [
                f"--kube-api-qps={spec.provisioner_api_qps:g}",
                f"--kube-api-burst={2 * spec.provisioner_api_qps:g}",
            ]
            if spec.provisioner_api_qps is not None
            else []
        ),
        *(["--strict-topology"] if spec.strict_topology else []),
        *feature_gate_flags(spec.sidecar_feature_gates, "csi-provisioner"),
        *_RETRIES,
        "--v=4",
    ]


DISTRIBUTED_PROVISIONER_FLAGS = ["--node-deployment", "--node-deployment-immediate-binding=false"]
"""Added for a per-node provisioner (NODE_NAME in its environment): it provisions only
claims whose selected node is its own."""


def attacher_flags(spec: DriverDeployment) -> list[str]:
    """external-attacher's flags besides --csi-address and --kubeconfig."""
    gates = feature_gate_flags(spec.sidecar_feature_gates, "csi-attacher")
    return ["--leader-election=false", *gates, *_RETRIES, "--v=4"]


SNAPSHOTTER_RESYNC = "20s"
"""How often csi-snapshotter looks at every VolumeSnapshotContent again (see
snapshotter_flags)."""


def snapshotter_flags(spec: DriverDeployment) -> list[str]:
    """csi-snapshotter's flags besides --csi-address and --kubeconfig (next to the
    central controller; the cluster's snapshot-controller does the rest).

    --resync-period: a VolumeSnapshot deleted just as it became ready can leave its
    content with a deletion timestamp that csi-snapshotter looked at once, too early,
    and is not told about again until the next resync (docs/findings.md,
    "external-snapshotter: a snapshot deleted as it becomes ready waits for a resync").
    The default period is 15 minutes; a test waits 60 seconds."""
    return [
        "--leader-election=false",
        f"--resync-period={SNAPSHOTTER_RESYNC}",
        "--extra-create-metadata",
        *feature_gate_flags(spec.sidecar_feature_gates, "csi-snapshotter"),
        *_RETRIES,
        "--v=4",
    ]


SNAPSHOT_CONTROLLER_RESYNC = "20s"
"""How often the cluster's snapshot-controller looks at every VolumeSnapshot and
content again (see snapshot_controller_flags)."""


def snapshot_controller_flags() -> list[str]:
    """The cluster's snapshot-controller's flags besides --kubeconfig (one for every
    driver, see csi_harness._internal.deploy.snapshot_controller).

    --kube-api-qps/--kube-api-burst: at its defaults (5 and 10) the one controller of
    all the tests at the same time waited about 200 ms before each request ("client-side
    throttling" in its log on kind).

    --resync-period: as csi-snapshotter's (snapshotter_flags), so that a deletion the
    controller left half done is looked at again within seconds, not 15 minutes
    (docs/findings.md, "external-snapshotter: a deleted VolumeSnapshot that stayed")."""
    return [
        "--leader-election=false",
        f"--resync-period={SNAPSHOT_CONTROLLER_RESYNC}",
        "--kube-api-qps=50",
        "--kube-api-burst=100",
        "--retry-interval-start=500ms",
        "--retry-interval-max=5s",
        "--v=4",
    ]


RESIZER_RESYNC = "20s"
"""How often external-resizer looks at every claim again (see resizer_flags)."""


def resizer_flags(spec: DriverDeployment) -> list[str]:
    """external-resizer's flags besides --csi-address and --kubeconfig.

    It has no per-node mode: it runs next to the central controller only. Its
    --timeout bounds ControllerExpandVolume as well as the wait for the socket.

    --resync-period: the modify controller drops a claim's update when the claim's
    PersistentVolume is not yet in its informer cache, and only the next resync brings
    the claim back (docs/findings.md, "external-resizer: a class change that arrives
    before the volume is cached waits for a resync"). The default period is 10 minutes;
    a test waits 90 seconds."""
    gates = feature_gate_flags(spec.sidecar_feature_gates, "csi-resizer")
    return [
        "--leader-election=false",
        f"--resync-period={RESIZER_RESYNC}",
        *gates,
        *_RETRIES,
        "--v=4",
    ]
