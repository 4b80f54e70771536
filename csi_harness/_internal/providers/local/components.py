"""Command lines and configuration files of the local cluster's components.

Pure functions from the cluster's layout to argv lists and file contents, so the
exact flags each component gets can be read (and unit-tested) in one place.
Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from csi_harness._internal.core.tools import Tools
from csi_harness._internal.deploy.sidecars import snapshot_controller_flags
from csi_harness._internal.deploy.spec import deep_merge
from csi_harness._internal.kube.feature_gates import format_feature_gates
from csi_harness._internal.providers.local.config import Component, LocalClusterConfig
from csi_harness._internal.providers.local.pki import ClusterPKI, KeyPair

LOOPBACK = "127.0.0.1"
SERVICE_CIDR = "10.96.0.0/16"


@dataclass(frozen=True)
class PodNetwork:
    """The pods' bridge of one cluster, reachable only from this host.

    The kubelet refuses a loopback node IP, so the node's address is the bridge's
    gateway address (``10.244.N.1``); N comes from the cluster name, so that two
    clusters on one host get different subnets.
    """

    bridge: str
    subnet_index: int

    @classmethod
    def for_cluster(cls, name: str) -> PodNetwork:
        digest = hashlib.sha256(name.encode()).hexdigest()
        return cls(bridge="csih" + digest[:8], subnet_index=int(digest[8:10], 16))

    @property
    def cidr(self) -> str:
        return f"10.244.{self.subnet_index}.0/24"

    @property
    def node_ip(self) -> str:
        return f"10.244.{self.subnet_index}.1"


PAUSE_IMAGE = "csi-mock.local/pause:3.10"


@dataclass(frozen=True)
class Layout:
    """Paths inside one run directory."""

    root: Path
    kubelet_root_dir: Path | None = None
    """The real kubelet's root directory when it is not inside the run directory."""

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def zygote_socket(self) -> Path:
        """Where the zygote that forks the drivers' csi-mock instances listens."""
        return self.root / "zygote.sock"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def etcd(self) -> Path:
        return self.root / "etcd"

    @property
    def configs(self) -> Path:
        return self.root / "config"

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig users get."""
        return self.root / "kubeconfig"

    def component_kubeconfig(self, name: str) -> Path:
        return self.configs / f"{name}.kubeconfig"

    def kubelet_root(self, node: str) -> Path:
        return self.kubelet_root_dir or self.root / node / "kubelet"

    def plugins_registry(self, node: str) -> Path:
        return self.kubelet_root(node) / "plugins_registry"

    def containerd_dir(self, node: str) -> Path:
        return self.root / node / "containerd"

    def shim_socket_dir(self, node: str) -> Path:
        """containerd limits the shim socket dir to 42 characters: a short path
        under /run, named by a hash of the node's containerd directory."""
        digest = hashlib.sha256(str(self.containerd_dir(node)).encode()).hexdigest()[:10]
        return Path("/run/csi-harness") / digest

    def containerd_socket(self, node: str) -> Path:
        return self.containerd_dir(node) / "containerd.sock"

    def cni_conf_dir(self, node: str) -> Path:
        return self.root / node / "cni" / "net.d"

    def cni_state_dir(self, node: str) -> Path:
        return self.root / node / "cni" / "state"

    @property
    def driver(self) -> Path:
        """The state of the cluster's own driver (csi-mock instances, their sockets)."""
        return self.driver_root("")

    def driver_root(self, suffix: str) -> Path:
        """The state of the driver with ``suffix`` (DriverDeployment.suffix)."""
        return self.root / f"driver{suffix}"


def write_kubeconfig(path: Path, *, server: str, ca: Path, client: KeyPair, user: str) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate": str(client.cert), "client-key": str(client.key)},
            }
        ],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
        "current-context": "local",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


def _gates(config: LocalClusterConfig, component: Component) -> list[str]:
    gates = config.feature_gates_for(component)
    return [f"--feature-gates={format_feature_gates(gates)}"] if gates else []


def etcd_argv(tools: Tools, layout: Layout, ports: dict[str, int]) -> list[str]:
    client = f"http://{LOOPBACK}:{ports['etcd']}"
    peer = f"http://{LOOPBACK}:{ports['etcd-peer']}"
    return [
        tools["etcd"],
        "--name=local",
        f"--data-dir={layout.etcd}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=local={peer}",
        # A throwaway test cluster: durability across power loss is not needed.
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def apiserver_argv(
    tools: Tools, config: LocalClusterConfig, pki: ClusterPKI, ports: dict[str, int]
) -> list[str]:
    kubelet_client = pki.clients["apiserver-kubelet-client"]
    return [
        tools["kube-apiserver"],
        f"--etcd-servers=http://{LOOPBACK}:{ports['etcd']}",
        f"--bind-address={LOOPBACK}",
        f"--advertise-address={LOOPBACK}",
        f"--secure-port={ports['apiserver']}",
        f"--tls-cert-file={pki.apiserver.cert}",
        f"--tls-private-key-file={pki.apiserver.key}",
        f"--client-ca-file={pki.ca.cert}",
        "--service-account-issuer=https://kubernetes.default.svc",
        f"--service-account-key-file={pki.service_account_pub}",
        f"--service-account-signing-key-file={pki.service_account_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        "--allow-privileged=true",
        f"--kubelet-client-certificate={kubelet_client.cert}",
        f"--kubelet-client-key={kubelet_client.key}",
        "--kubelet-preferred-address-types=InternalIP",
        # The endpoint reconciler refuses loopback addresses; nothing here needs the
        # default/kubernetes Service to have endpoints.
        "--endpoint-reconciler-type=none",
        "--profiling=false",
        *_gates(config, Component.APISERVER),
    ]


def controller_manager_argv(
    tools: Tools, config: LocalClusterConfig, layout: Layout, pki: ClusterPKI, ports: dict[str, int]
) -> list[str]:
    return [
        tools["kube-controller-manager"],
        f"--kubeconfig={layout.component_kubeconfig('kube-controller-manager')}",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={ports['controller-manager']}",
        # Every default controller, including persistentvolume-binder, attachdetach and
        # ephemeral-volume; each with its own service account, as in real clusters. And
        # the SELinuxWarningController, off by default, which reports pods that would
        # mount one volume with conflicting SELinux labels
        # (tests/e2e/test_selinux_warning_controller.py).
        "--controllers=*,selinux-warning-controller",
        # Its metrics on loopback without credentials, as its health endpoints.
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki.service_account_key}",
        f"--root-ca-file={pki.ca.cert}",
        f"--cluster-signing-cert-file={pki.ca.cert}",
        f"--cluster-signing-key-file={pki.ca.key}",
        "--leader-elect=false",
        "--profiling=false",
        *_gates(config, Component.CONTROLLER_MANAGER),
    ]


def scheduler_configuration(config: LocalClusterConfig, layout: Layout) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(layout.component_kubeconfig("kube-scheduler"))},
        "leaderElection": {"leaderElect": False},
        # Tuned for tests (docs/benchmarks.md): a pod that failed scheduling (no
        # capacity yet, a selected node dropped) is retried after 1 s, 2 s at most,
        # instead of backing off up to 10 s.
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": 2,
    }
    merged = deep_merge(base, config.scheduler)
    # The scheduler must reach this cluster whatever the caller's configuration says.
    merged["clientConnection"]["kubeconfig"] = base["clientConnection"]["kubeconfig"]
    return merged


def scheduler_argv(
    tools: Tools, config: LocalClusterConfig, layout: Layout, ports: dict[str, int]
) -> list[str]:
    return [
        tools["kube-scheduler"],
        f"--config={layout.configs / 'kube-scheduler.yaml'}",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={ports['scheduler']}",
        "--profiling=false",
        *_gates(config, Component.SCHEDULER),
    ]


def snapshot_controller_argv(tools: Tools, layout: Layout, ports: dict[str, int]) -> list[str]:
    """external-snapshotter's snapshot-controller: one for the cluster, whatever the
    drivers (it binds VolumeSnapshots to VolumeSnapshotContents, which each driver's
    csi-snapshotter then cuts). Its Prometheus metrics (``/metrics``, the
    ``snapshot_controller_operation_total_seconds`` histogram per driver and operation)
    are served on loopback, for ``LocalCluster.snapshot_controller_metrics``."""
    return [
        tools["snapshot-controller"],
        f"--kubeconfig={layout.component_kubeconfig('csi-sidecars')}",
        f"--http-endpoint={LOOPBACK}:{ports['snapshot-controller']}",
        *snapshot_controller_flags(),
    ]


def containerd_config(tools: Tools, layout: Layout, node: str) -> str:
    """containerd's config (version 3 keys, accepted by 2.x): every path under the run
    directory, including shim sockets, runc state and network namespaces, so teardown
    finds everything and nothing collides with a containerd the host may run."""
    base = layout.containerd_dir(node)
    socket = layout.containerd_socket(node)
    disabled = [
        "io.containerd.snapshotter.v1.btrfs",
        "io.containerd.snapshotter.v1.zfs",
        "io.containerd.snapshotter.v1.devmapper",
        "io.containerd.snapshotter.v1.blockfile",
        "io.containerd.snapshotter.v1.erofs",
        "io.containerd.nri.v1.nri",
        "io.containerd.internal.v1.opt",
        "io.containerd.tracing.processor.v1.otlp",
        "io.containerd.internal.v1.tracing",
    ]

    def q(value: str | Path) -> str:
        return "'" + str(value) + "'"

    return "\n".join(
        [
            "version = 3",
            f"root = {q(base / 'root')}",
            f"state = {q(base / 'state')}",
            "imports = []",
            # Fail at start-up, not at the kubelet's first call, when CRI cannot load.
            "required_plugins = ['io.containerd.grpc.v1.cri']",
            f"disabled_plugins = [{', '.join(q(p) for p in disabled)}]",
            "[grpc]",
            f"  address = {q(socket)}",
            "[ttrpc]",
            f"  address = {q(str(socket) + '.ttrpc')}",
            "[plugins.'io.containerd.shim.v1.manager']",
            f"  socket_dir = {q(layout.shim_socket_dir(node))}",
            "[plugins.'io.containerd.cri.v1.images']",
            "  snapshotter = 'overlayfs'",
            "[plugins.'io.containerd.cri.v1.images'.pinned_images]",
            f"  sandbox = {q(PAUSE_IMAGE)}",
            "[plugins.'io.containerd.cri.v1.runtime']",
            "  netns_mounts_under_state_dir = true",
            # This VM lacks CAP_SYS_RESOURCE, so runc cannot lower oom_score_adj below
            # containerd's own (the kubelet asks -998 for sandboxes): clamp instead.
            "  restrict_oom_score_adj = true",
            f"  cdi_spec_dirs = [{q(base / 'cdi')}]",
            "[plugins.'io.containerd.cri.v1.runtime'.containerd]",
            "  default_runtime_name = 'runc'",
            "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]",
            "  runtime_type = 'io.containerd.runc.v2'",
            "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]",
            f"  BinaryName = {q(tools['runc'])}",
            f"  Root = {q(base / 'runc')}",
            "  SystemdCgroup = false",
            "[plugins.'io.containerd.cri.v1.runtime'.cni]",
            f"  bin_dirs = [{q(tools.bin_dir)}]",
            f"  conf_dir = {q(layout.cni_conf_dir(node))}",
            "[plugins.'io.containerd.grpc.v1.cri']",
            f"  stream_server_address = {q(LOOPBACK)}",
            "  stream_server_port = '0'",
            "",
        ]
    )


def cni_config(layout: Layout, node: str, network: PodNetwork) -> dict[str, Any]:
    """A bridge network private to this node's pods; no masquerading, no route to the
    outside: pods only talk to each other and to the host's loopback services."""
    return {
        "cniVersion": "1.0.0",
        "name": "csi-harness",
        "plugins": [
            {
                "type": "bridge",
                "bridge": network.bridge,
                "isGateway": True,
                "ipMasq": False,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": network.cidr}]],
                    "dataDir": str(layout.cni_state_dir(node)),
                },
            },
            {"type": "loopback"},
        ],
    }


def kubelet_configuration(
    config: LocalClusterConfig,
    layout: Layout,
    pki: ClusterPKI,
    node: str,
    ports: dict[str, int],
    cgroup_root: str,
    network: PodNetwork,
) -> dict[str, Any]:
    gates = config.feature_gates_for(Component.KUBELET)
    doc: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # The host runs cgroup v1 (hybrid); from Kubernetes 1.35 the kubelet refuses
        # to start there unless told otherwise.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "address": network.node_ip,
        "port": ports[f"kubelet-{node}"],
        "readOnlyPort": 0,
        "healthzBindAddress": LOOPBACK,
        "healthzPort": ports[f"kubelet-healthz-{node}"],
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(pki.ca.cert)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket(node)}",
        "failSwapOn": False,
        "podLogsDir": str(layout.root / node / "pod-logs"),
        "resolvConf": "",
        "serializeImagePulls": False,
        # Disk use of the host is not this cluster's business: never evict, never GC images.
        "evictionHard": {
            "memory.available": "1Mi",
            "nodefs.available": "0%",
            "imagefs.available": "0%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "nodeStatusReportFrequency": "10s",
        # Tuned for tests (docs/benchmarks.md): the status is computed every second
        # and posted when it changed, so that a volume the kubelet unmounted leaves
        # volumesInUse, and the attach/detach controller may detach it, within a
        # second rather than the default 10 s.
        "nodeStatusUpdateFrequency": "1s",
        "syncFrequency": "10s",
        # Volume stats, and with the CSIVolumeHealth gate the volume and storage health
        # probes (NodeGetVolumeHealth, NodeGetStorageHealth), every 10 s instead of every
        # minute: a test of them waits for two or three periods.
        "volumeStatsAggPeriod": "10s",
        "fileCheckFrequency": "10s",
        "staticPodPath": "",
        "protectKernelDefaults": False,
        "makeIPTablesUtilChains": False,
    }
    if gates:
        doc["featureGates"] = gates
    return doc


def kubelet_argv(tools: Tools, layout: Layout, node: str, network: PodNetwork) -> list[str]:
    root = layout.kubelet_root(node)
    return [
        tools["kubelet"],
        f"--config={layout.configs / f'kubelet-{node}.yaml'}",
        f"--kubeconfig={layout.component_kubeconfig(f'kubelet-{node}')}",
        f"--root-dir={root}",
        f"--cert-dir={root / 'pki'}",
        f"--hostname-override={node}",
        f"--node-ip={network.node_ip}",
    ]


def containerd_argv(tools: Tools, layout: Layout, node: str) -> list[str]:
    return [tools["containerd"], f"--config={layout.containerd_dir(node) / 'config.toml'}"]
