"""A kind cluster as a ``csi_harness._internal.providers.base.Cluster``: made from csi-mock's
offline node image with the driver and sidecar images baked in
(``csi_harness._internal.providers.kind.baked_node_image``), networked by
``csi_harness._internal.providers.kind.network``, and csi-mock deployed in-cluster like on
any existing cluster.

    cluster = KindCluster("csi-mock", KIND_CONFIG_DIR / "two-nodes.yaml")
    cluster.up()          # node image with the images (cached), kind create, CNI
    driver = cluster.redeploy_driver(DriverDeployment())
    cluster.down()        # kind delete cluster
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import httpx
from lightkube.core.exceptions import ApiError
from lightkube.resources.apps_v1 import DaemonSet, Deployment
from lightkube.resources.core_v1 import Node, Pod

from csi_harness._internal.core import registry
from csi_harness._internal.core.cluster_guard import refuse_cluster
from csi_harness._internal.core.commands import CommandFailed
from csi_harness._internal.core.package_data import DOCKER_ENGINE_SCRIPT, KIND_CONFIG_DIR
from csi_harness._internal.core.tools import Tools, ToolsMissing
from csi_harness._internal.core.unsupported import Unsupported
from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.deploy import snapshot_controller
from csi_harness._internal.deploy.image_set import (
    BUILT,
    PYTHON_BASE_UPSTREAM,
    ImageSet,
    ImageSource,
    image_set,
    kind_node_image,
)
from csi_harness._internal.deploy.images import (
    DRIVER_IMAGE,
    build_driver_image,
    pinned_version,
)
from csi_harness._internal.deploy.snapshot_controller import snapshot_crd_dir
from csi_harness._internal.kube.apiproxy import api_server_access
from csi_harness._internal.kube.nodes import heartbeat_since
from csi_harness._internal.providers.kind import network
from csi_harness._internal.providers.kind.baked_node_image import bake_images
from csi_harness._internal.providers.kind.cluster_config import write_effective_config
from csi_harness._internal.providers.kind.kind_binary import find_kind
from csi_harness._internal.providers.kind.kind_cli import (
    DEFAULT_KUBECONFIG_ROOT,
    KindCli,
)
from csi_harness._internal.providers.kind.node_image import (
    build_node_image,
    is_offline_node_image,
)
from csi_harness._internal.providers.kind.node_image_traits import check_version, read_traits
from csi_harness._internal.providers.kind.registry_mirror import MirrorAddress
from csi_harness._internal.providers.kind.scheduler import SchedulerManifest
from csi_harness._internal.providers.kind.suite_images import (
    SuiteImages,
    build_suite_images,
    driver_image_is_local,
    driver_image_to_load,
    load_suite_images,
)
from csi_harness._internal.providers.kind.unpacked_images import Unpacking
from csi_harness._internal.providers.kubeconfig_cluster import KubeconfigCluster

DEFAULT_CONFIG = KIND_CONFIG_DIR / "suites.yaml"
CONTROLLER_MANAGER_PORT = 10257
"""kube-controller-manager's secure port (kubeadm's default)."""
READY_TIMEOUT = 240.0


class KindClusterError(RuntimeError):
    """The kind cluster could not be made ready; the message has the cause and the fix."""


class KindCluster(KubeconfigCluster):
    """One kind cluster named ``name`` from ``config_file``.

    ``node_image``: a node image of the user's own (e.g. built by ``kind build
    node-image`` from a Kubernetes branch); default: csi-mock's offline image for the
    pinned toolset. ``reuse``: keep a running cluster of that name instead of
    recreating it."""

    def __init__(
        self,
        name: str = "csi-mock",
        config_file: Path = DEFAULT_CONFIG,
        *,
        node_image: str | None = None,
        images: ImageSet | None = None,
        registry_mirror: MirrorAddress | None = None,
        reuse: bool = False,
        tools: Tools | None = None,
        progress: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.images = images or image_set(ImageSource(BUILT))
        # Built images need the pinned tools; pulled ones only kind and kubectl, from
        # PATH when the user has them.
        self.tools = tools or (
            Tools.locate() if not self.images.source.pulls else _tools_if_built()
        )
        kubeconfig = DEFAULT_KUBECONFIG_ROOT / f"kind-{name}" / "kubeconfig"
        super().__init__(
            kubeconfig,
            name=name,
            kubectl=self._kubectl(),
            driver_image=self.images.driver or DRIVER_IMAGE,
            sidecar_images=self.images.sidecars,
            progress=progress,
        )
        self.config_file = config_file
        self.node_image = node_image
        self.registry_mirror = registry_mirror
        self.reuse = reuse
        self.cli = KindCli(
            name,
            config_file,
            self.driver_image,
            kubeconfig=kubeconfig,
            wait=None,
            kind=find_kind(prefer_path=self.images.source.pulls),
        )
        self.timings: dict[str, float] = {}
        self._baked: SuiteImages | None = None
        """The built images the nodes started with (``_bake_suite_images``)."""
        self._scheduler = SchedulerManifest(
            lambda argv, stdin: self._docker_exec(self.control_plane, argv, stdin)
        )
        self._scheduler_config: dict[str, object] = {}
        # The driver's controller pods go to the control plane, so that the workers the
        # tests compare (e.g. by free capacity, where the scheduler's resource scoring
        # also counts pods) are alike.
        self.controller_host = self.control_plane

    def _built_tools(self) -> Tools:
        """The pinned tools, which ``built`` images need (located in __init__)."""
        if self.tools is None:
            raise ToolsMissing("images 'built' need the pinned tools: csi-harness tools build")
        return self.tools

    def _kubectl(self) -> str:
        if self.tools is not None:
            return self.tools["kubectl"]
        found = shutil.which("kubectl")
        if found is None:
            raise ToolsMissing("no kubectl on PATH (https://kubernetes.io/docs/tasks/tools/)")
        return found

    @property
    def control_plane(self) -> str:
        """The control-plane node's container (kind names it after the cluster)."""
        return f"{self.name}-control-plane"

    # -- scheduler -----------------------------------------------------------------------

    @property
    def scheduler_config(self) -> dict[str, object]:
        return dict(self._scheduler_config)

    def restart_scheduler(
        self, scheduler: Mapping[str, object], feature_gates: Mapping[str, bool] | None = None
    ) -> None:
        """Rewrite the scheduler's static pod (``csi_harness._internal.providers.kind.scheduler``)
        and wait
        until the kubelet runs the new one, Ready."""
        before = _config_hash(self._scheduler_pod())
        self._scheduler.apply(scheduler, feature_gates)
        self._scheduler_config = dict(scheduler)

        def restarted() -> tuple[bool, str]:
            pod = self._scheduler_pod()
            if pod is None:
                return False, "no kube-scheduler pod"
            conditions = (pod.status.conditions if pod.status else None) or []
            ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
            config_hash = _config_hash(pod)
            if config_hash != before and ready:
                return True, ""
            return False, f"scheduler pod hash {config_hash} (was {before}), ready {ready}"

        wait_for("kube-scheduler to restart with its new configuration", restarted, timeout=120)

    def _scheduler_pod(self) -> Pod | None:
        for pod in self.kube.list(
            Pod, namespace="kube-system", labels={"component": "kube-scheduler"}
        ):
            return pod
        return None

    # -- kubelets ------------------------------------------------------------------------

    def restart_kubelet(self, node: str) -> None:
        """Restart ``node``'s kubelet through the node container's systemd, as an
        operator would; wait until it serves /healthz (through the API server's node
        proxy) and has posted the node's status again. Its pods keep running."""
        if node not in {n.metadata.name for n in self.kube.list(Node) if n.metadata}:
            raise Unsupported(f"cluster {self.name!r} has no node {node!r}")
        stopped = datetime.now(UTC).replace(microsecond=0)
        self._docker_exec(node, ["systemctl", "restart", "kubelet"], None)
        access = api_server_access(self.kubeconfig)

        def healthy() -> tuple[bool, str]:
            try:
                response = http.get(f"{access.node_proxy_url(node)}/healthz")
            except httpx.HTTPError as error:
                return False, str(error)
            return response.status_code == 200, f"HTTP {response.status_code}"

        with access.client(timeout=2) as http:
            wait_for(f"the kubelet of {node} to serve /healthz", healthy, timeout=READY_TIMEOUT)
        wait_for(
            f"the kubelet of {node} to post the node's status after {stopped:%H:%M:%S}",
            partial(heartbeat_since, self.kube, node, stopped),
            timeout=READY_TIMEOUT,
            interval=0.5,
        )

    # -- snapshot-controller -------------------------------------------------------------

    def snapshot_controller_metrics(self) -> str:
        """The cluster's snapshot-controller's ``/metrics``, through the API server's
        pod proxy (it serves them on its ``METRICS_PORT``)."""
        pods = [
            pod
            for pod in self.kube.list(
                Pod,
                namespace=snapshot_controller.NAMESPACE,
                labels=dict(snapshot_controller.SELECTOR),
            )
            if pod.status is not None and pod.status.phase == "Running" and pod.metadata
        ]
        if not pods:
            raise Unsupported(f"cluster {self.name!r} runs no snapshot-controller pod")
        access = api_server_access(self.kubeconfig)
        name = pods[0].metadata.name if pods[0].metadata else ""
        url = access.pod_proxy_url(
            snapshot_controller.NAMESPACE, name or "", snapshot_controller.METRICS_PORT
        )
        with access.client(timeout=10) as http:
            response = http.get(f"{url}/metrics")
        response.raise_for_status()
        return response.text

    # -- kube-controller-manager ---------------------------------------------------------

    def controller_manager_metrics(self) -> str:
        """The kube-controller-manager's ``/metrics`` through the API server's pod proxy.
        kind-config/suites.yaml has it listen on every address and allow the path without
        credentials; a cluster of another configuration refuses, and that is Unsupported."""
        pod = f"kube-controller-manager-{self.control_plane}"
        access = api_server_access(self.kubeconfig)
        url = access.pod_proxy_url("kube-system", pod, CONTROLLER_MANAGER_PORT, https=True)
        with access.client(timeout=10) as http:
            response = http.get(f"{url}/metrics")
        if response.status_code != 200:
            raise Unsupported(
                f"the kube-controller-manager of kind cluster {self.name!r} does not serve "
                f"/metrics through the pod proxy (HTTP {response.status_code}): it needs "
                "kind-config/suites.yaml's controllerManager settings"
            )
        return response.text

    # -- lifecycle -----------------------------------------------------------------------

    def up(self) -> None:
        """Create (or, with ``reuse``, adopt) the cluster and make it ready for the suites.
        If that fails, a cluster this call created is deleted again."""
        refuse_cluster(f"bring up kind cluster {self.name!r}")
        self._created = False
        try:
            self._up()
        except BaseException:
            if self._created or not self.reuse:
                self.cli.delete()
            raise

    def _up(self) -> None:
        mark = time.monotonic()

        def phase(name: str) -> None:
            nonlocal mark
            now = time.monotonic()
            self.timings[name] = round(now - mark, 1)
            mark = now

        image = self.node_image
        adopting = self.reuse and self.cli.exists()
        if image is None and not self.images.source.pulls:
            built = build_node_image(self._built_tools(), progress=self.progress)
            image = built.tag
            self.progress(f"node image {image} ({'cached' if built.cached else 'built'})")
        elif image is None:
            image = self.images.source.name(kind_node_image(pinned_version("kubernetes")))
        if not self.images.source.pulls and not adopting and is_offline_node_image(image):
            image = self._bake_suite_images(image)
        traits = read_traits(image)
        if self.node_image is None or self.images.source.pulls:
            check_version(traits, pinned_version("kubernetes"))
        self.cli.node_image = image
        self.cli.config_file = write_effective_config(
            self.config_file,
            kind_cni=traits.carries_cni,
            mirror=self.registry_mirror,
            workdir=self.kubeconfig.parent,
        )
        self.progress(
            f"node image {image} (Kubernetes {traits.kubernetes_version}, "
            + ("kind's CNI and CoreDNS)" if traits.carries_cni else "no CNI of its own)")
        )
        phase("node image")
        unpacking: Unpacking | None = None
        if adopting:
            self.progress(f"reusing kind cluster {self.name!r}")
            self.cli.export_kubeconfig()
        else:
            if self.cli.exists():
                self.cli.delete()
            self.progress(f"kind create cluster {self.name!r} ({self.config_file.name})")
            self._created = True
            unpacking = self._start_unpacking()
            try:
                self.cli.create()
            except CommandFailed as exc:
                raise KindClusterError(
                    f"kind could not create cluster {self.name!r}; nothing is left behind.\n"
                    f"{exc}\nIs the Docker engine running with the runc wrapper "
                    f"(bash {DOCKER_ENGINE_SCRIPT} start)?"
                ) from exc
            finally:
                if unpacking is not None:
                    unpacking.nodes_made()
        phase("create")
        self.prepare(phase)
        if unpacking is not None:
            for node, why in unpacking.wait().items():
                self.progress(f"{node} could not unpack the images ahead (unpacked later): {why}")
            phase("unpack")

    def prepare(self, phase: Callable[[str], None] = lambda _: None) -> None:
        """Make a running kind cluster, made here or by hand with ``kind create
        cluster``, ready for the suites: pod network when kind's own CNI is off, nodes
        Ready, CoreDNS off when the node image is the offline one, images loaded."""
        self.cli.export_kubeconfig()
        if self.registry_mirror is not None and self.registry_mirror.host == registry.CONTAINER:
            # The registry of `csi-harness registry serve`: on kind's network, the nodes
            # reach it by its name (kind's guide to local registries does the same).
            registry.connect()
            self.progress(f"registry {registry.CONTAINER} joined kind's network")
        if not self._has_kindnet():
            self._install_network()
            self._without_coredns()
        self._wait_nodes_ready()
        phase("network")
        self._load_images()
        phase("images")
        crds = snapshot_crd_dir(self.tools)
        if crds is None:
            self.progress(
                "no snapshot CRDs (they come with the pinned csi-snapshotter build or its Go "
                "module): snapshot-controller not installed, snapshot tests fail"
            )
        else:
            snapshot_controller.install(
                self.kube, crds, self.sidecar_images["snapshot-controller"],
                field_manager="csi-harness",
            )  # fmt: skip
        phase("snapshot controller")

    def down(self) -> None:
        refuse_cluster(f"delete kind cluster {self.name!r}")
        self.remove_driver()
        self.cli.delete()

    def release(self) -> None:
        """Leave the cluster running as it was made: the driver removed, kubeadm's
        scheduler manifest back."""
        self.remove_driver()
        if self._scheduler_config:
            self.restart_scheduler({})

    def _has_kindnet(self) -> bool:
        """Whether kind installed its own CNI (the ``kindnet`` DaemonSet, applied during
        ``kind create`` unless ``networking.disableDefaultCNI``)."""
        try:
            self.kube.get(DaemonSet, "kindnet", namespace="kube-system")
        except ApiError as exc:
            if exc.status.code == 404:
                return False
            raise
        return True

    # -- steps ---------------------------------------------------------------------------

    def _node_addressing(self) -> tuple[bool, list[network.NodeAddressing] | str]:
        addressing, waiting = [], []
        for node in self.kube.list(Node):
            name = str(node.metadata.name if node.metadata else "")
            cidr = node.spec.podCIDR if node.spec else None
            addresses = (node.status.addresses if node.status else None) or []
            internal = [a.address for a in addresses if a.type == "InternalIP"]
            if not cidr or not internal:
                waiting.append(name)
                continue
            addressing.append(network.NodeAddressing(name, internal[0], cidr))
        if waiting or not addressing:
            return False, f"nodes without a pod range or address yet: {waiting or 'no nodes'}"
        return True, addressing

    def _install_network(self) -> None:
        found: list[network.NodeAddressing] = []

        def ready() -> tuple[bool, str]:
            ok, value = self._node_addressing()
            if ok and not isinstance(value, str):
                found[:] = value
                return True, ""
            return False, str(value)

        wait_for("every node's pod range (spec.podCIDR)", ready, timeout=READY_TIMEOUT)
        network.install(found, self._docker_exec)

    def _docker_exec(self, node: str, argv: Sequence[str], stdin: str | None) -> str:
        result = subprocess.run(
            ["docker", "exec", "-i", node, *argv],
            input=stdin or "",
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise KindClusterError(
                f"`docker exec {node} {' '.join(argv)}` failed: {result.stderr.strip()}"
            )
        return result.stdout

    def _wait_nodes_ready(self) -> None:
        def ready() -> tuple[bool, str]:
            not_ready = []
            for node in self.kube.list(Node):
                conditions = (node.status.conditions if node.status else None) or []
                if not any(c.type == "Ready" and c.status == "True" for c in conditions):
                    not_ready.append(str(node.metadata.name if node.metadata else "?"))
            return not not_ready, f"not Ready: {not_ready}"

        wait_for("every kind node to be Ready", ready, timeout=READY_TIMEOUT, interval=1)

    def _without_coredns(self) -> None:
        # The offline node image has no CoreDNS image (docs/kind.md): a cluster made
        # here has no CoreDNS (cluster_config skips kubeadm's addon); one made by hand
        # is left at zero replicas rather than pods failing to pull forever (and
        # holding up the other pulls of their node).
        try:
            self.kube.patch(
                Deployment, "coredns", {"spec": {"replicas": 0}}, namespace="kube-system"
            )
        except ApiError as exc:
            if exc.status.code != 404:
                raise

    def _bake_suite_images(self, node_image: str) -> str:
        """``node_image`` with the suites' built images in it (``baked_node_image``): the
        nodes of the cluster made from it need no ``kind load``."""
        suite = build_suite_images(self._built_tools(), self.progress)
        baked = bake_images(
            self._built_tools(), node_image, suite.archives, [suite.driver], progress=self.progress
        )
        self.progress(f"node image {baked.tag} ({'cached' if baked.cached else 'baked'})")
        self._baked = suite
        return baked.tag

    def _start_unpacking(self) -> Unpacking | None:
        """The baked images unpacked on each node as ``kind create`` makes it
        (``unpacked_images``), rather than by the CRI under the first driver."""
        if self._baked is None:
            return None
        return Unpacking(self.name, self._baked.references).start()

    def _load_images(self) -> None:
        if self._baked is not None:
            self.sidecar_images.update(self._baked.sidecars)
            self.driver_image = self._baked.driver
            return
        if not self.images.source.pulls:
            self.sidecar_images.update(
                load_suite_images(self.cli, self._built_tools(), self.progress)
            )
            self.driver_image = DRIVER_IMAGE
            return

        # Pulled by the nodes: the sidecars and the pods' busybox. csi-mock's own image is
        # the one this cluster is given: the user's (loaded when the engine has it) or
        # one built from the installed package on the Dockerfile's public base.
        def build() -> str:
            self.progress(f"building {DRIVER_IMAGE} on {PYTHON_BASE_UPSTREAM}")
            return build_driver_image(DRIVER_IMAGE, base=PYTHON_BASE_UPSTREAM)

        driver, load = driver_image_to_load(self.images.driver, build, driver_image_is_local)
        if load:
            self.progress(f"kind load docker-image {driver}")
            self.cli.load_image(driver)
        self.driver_image = driver


def _tools_if_built() -> Tools | None:
    try:
        return Tools.locate()
    except ToolsMissing:
        return None


def _config_hash(pod: Pod | None) -> str | None:
    """The static pod's configuration hash, which the kubelet changes with the manifest."""
    if pod is None or pod.metadata is None:
        return None
    return (pod.metadata.annotations or {}).get("kubernetes.io/config.hash")
