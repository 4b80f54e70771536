"""Running Kubernetes' "External Storage" e2e suites (e2e.test under ginkgo) against
csi-mock, and the local cluster profile they run on.

The profile has one real kubelet and no simulated nodes: the suites pick nodes from
every Ready, schedulable Node, and a simulated node never runs a pod. The images the
storage specs start (busybox, agnhost) are built here and imported under the names
e2e.test asks for (``e2e.test --list-images``).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from csi_harness._internal.core.image_archive import LocalImage
from csi_harness._internal.core.images import (
    build_agnhost_image,
    build_busybox_image,
    build_gnu_tools_image,
)
from csi_harness._internal.core.tools import Tools, ToolsMissing
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.providers.factory import ClusterOptions, open_provider
from csi_harness._internal.upstream.summary import RunSummary, read_junit
from csi_harness._internal.upstream.testdriver import (
    attributes_class_manifest,
    driver_definition,
    dump,
    storage_class_manifest,
)

UPSTREAM_TOOLS = ("e2e.test", "ginkgo", "agnhost")
CLUSTER_LOGS = "cluster-logs"
"""Under the report directory: the local cluster's component logs, kept when a spec failed."""
FOCUS = r"External.Storage"
SKIPS = {
    r"\[Disruptive\]": "stops and restarts the kubelet over SSH or systemctl: the local"
    " provider's kubelet is a process of the harness, kind nodes have no SSH",
    r"any volume data source": "deploys hello-populator and volume-data-source-validator"
    " from registry.k8s.io/sig-storage images, which are not built here",
    r"should provision correct filesystem size when restoring snapshot to larger size pvc": (
        "checks df in the pod: csi-mock's filesystem volumes are directories on the node's"
        " filesystem (as hostpath's are), so df reports that filesystem, not the volume;"
        " a larger restore is larger in csi-mock's accounting (tests/driver), not in a"
        " filesystem of its own"
    ),
}
"""Specs left out (``ginkgo --skip``) on every provider, each with why."""
LOCAL_SKIPS = {
    **SKIPS,
    r"should not mount / map unused volumes in a pod": "looks at the node through a"
    " host-exec pod that runs nsenter --mount=/rootfs/proc/1/ns/mnt; this machine's PID 1"
    " cannot be entered, not even by root on the host (docs/upstream-e2e.md)",
}
"""... and on the local provider, whose node is this machine."""
SKIP_EXPLANATIONS: dict[str, str] = {
    # Reasons as reported -> why that is right for csi-mock here.
    **{f"excluded by --skip {pattern}": why for pattern, why in LOCAL_SKIPS.items()},
    "Driver csi-mock.example only supports singleNodeVolume -- skipping": "volumes live"
    " in one node's pool, as with hostpath",
    "Driver csi-mock.example doesn't support RWX -- skipping": "one node's pool cannot"
    " serve other nodes",
    'Driver "csi-mock.example" does not support cloning - skipping': "clones not configured"
    " (DriverDeployment.clones)",
    'Driver "csi-mock.example" does not support volume clone - skipping': "clones not"
    " configured (DriverDeployment.clones)",
    'Driver "csi-mock.example" does not support volume snapshots - skipping': "snapshots not"
    " configured (DriverDeployment.snapshots)",
    'Driver "csi-mock.example" does not support snapshots - skipping': "the suite's rule: the"
    " spec runs only in patterns with a snapshot type",
    'Driver "csi-mock.example" does not support ROX access mode - skipping': "ReadOnlyMany"
    " not declared: a volume lives in one node's pool",
    'volume type "DynamicPV" is not ephemeral': "the suite's rule (the ephemeral snapshot"
    " patterns)",
    'volume type "GenericEphemeralVolume" is ephemeral': "the suite's rule (the dynamic and"
    " pre-provisioned snapshot patterns)",
    "Filesystem volume case should be covered by block volume case -- skipping": "the"
    " suite's own de-duplication",
    'Driver "csi-mock.example" has no configured VolumeAttributesClass - skipping': "no"
    " mutable parameters configured (DriverDeployment.mutable_parameters)",
    'Driver "csi-mock.example" does not support populating data from snapshot - skipping': (
        "snapshots not configured (DriverDeployment.snapshots)"
    ),
    "VolumeBindingMode immediate is not compatible with a multi-topology environment.": "the"
    " suite's rule: csi-mock reports a segment per node",
    "Not enough topologies in cluster -- skipping": "one node, one zone: these specs need"
    " two segments (the mission suites cover topology on three nodes)",
    'Driver "csi-mock.example" does not define supported mount option - skipping': "csi-mock"
    " bind-mounts and takes no mount options",
    "Driver csi-mock.example doesn't specify performance test options -- skipping": "no"
    " PerformanceTestOptions declared: csi-mock's speed is measured in benchmarks/",
    "Test is not valid for Block volume mode - skipping": "the suite's rule",
    "raw block volumes cannot be read-only": "the suite's rule",
    "skipping multiple PV mount test for block mode": "the suite's rule",
    "Skipping CSIInlineVolume test for expansion": "the suite's rule",
    "Multiple generic ephemeral volumes with immediate binding may cause pod startup failures"
    " when the volumes get created in separate topology segments.": "the suite's rule",
    "this driver does not support multiple PVs with the same volumeHandle": "multiplePVsSameID"
    " not declared: two PVs of one volume would publish it twice on one node; not tried",
}
MAX_VOLUME_SIZE = "8Gi"


def upstream_driver() -> DriverDeployment:
    """The driver of an upstream run: one roomy pool on the node (the suites create
    hundreds of volumes of up to a few GiB), sizes up to MAX_VOLUME_SIZE; snapshots
    (full copies), clones and ControllerModifyVolume of one parameter ("tier"), so the
    snapshot, clone and modify specs run."""
    return DriverDeployment(
        node_pool_size="200Gi",
        max_volume_size=MAX_VOLUME_SIZE,
        max_volumes_per_node=0,
        snapshots="full",
        clones=True,
        mutable_parameters={"tier": ["gold", "silver"]},
    )


@dataclass(frozen=True)
class UpstreamRun:
    """What to run and where the reports go."""

    report_dir: Path
    procs: int = 4
    focus: str = FOCUS
    skips: tuple[str, ...] = tuple(LOCAL_SKIPS)
    """Regular expressions of specs to leave out (joined for ginkgo --skip)."""
    timeout_seconds: float = 3600.0


def require_tools(tools: Tools) -> None:
    missing = [name for name in UPSTREAM_TOOLS if not (tools.bin_dir / name).exists()]
    if missing:
        raise ToolsMissing(
            f"missing in {tools.bin_dir}: {', '.join(missing)}; build them with"
            ' `make tools TOOLS="e2e ginkgo"`'
        )


SHELL_IMAGES = ("busybox", "nginx")
"""e2e images the External Storage specs only run shell commands in (sh, dd,
sha256sum, base64, grep, a script written to the volume): busybox provides them, so
these names are given to the busybox image. Every version e2e.test lists is tagged."""
GNU_DD_IMAGES = ("glibc-dns-testing",)
"""Images the specs pick for GNU dd (``oflag=nocache``, which busybox dd lacks): the
busybox image with the host's /bin/dd and /bin/sh and the libraries they load."""


def e2e_images(tools: Tools) -> list[LocalImage]:
    """The images the External Storage specs start, under the exact names this
    e2e.test uses."""
    listed = subprocess.run(
        [tools["e2e.test"], "--list-images"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.split()

    def named(names: tuple[str, ...]) -> tuple[str, ...]:
        tags = tuple(i for i in listed if any(f"/e2e-test-images/{n}:" in i for n in names))
        if not tags:
            raise LookupError(f"e2e.test --list-images names none of {names}")
        return tags

    agnhost = _newest(listed, "/e2e-test-images/agnhost:")
    return [
        build_busybox_image(tags=named(SHELL_IMAGES)),
        # The host's sh too: busybox's sh runs its own dd applet before any in PATH.
        build_gnu_tools_image(named(GNU_DD_IMAGES), [Path("/bin/dd"), Path("/bin/sh")]),
        build_agnhost_image(Path(tools["agnhost"]), (agnhost,)),
    ]


def _newest(images: list[str], marker: str) -> str:
    """The highest version of one image among e2e.test's list (it also lists older
    ones some other specs pin)."""
    found = [image for image in images if marker in image]
    if not found:
        raise LookupError(f"e2e.test --list-images names no image containing {marker!r}")

    def version(image: str) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", image.rsplit(":", 1)[1]))

    return max(found, key=version)


def write_testdriver(spec: DriverDeployment, directory: Path) -> Path:
    """testdriver.yaml and the StorageClass it names, in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    storage_class = directory / "storageclass.yaml"
    storage_class.write_text(dump(storage_class_manifest(spec)))
    attributes_class = None
    if spec.mutable_parameters:
        attributes_class = directory / "volumeattributesclass.yaml"
        attributes_class.write_text(dump(attributes_class_manifest(spec)))
    path = directory / "testdriver.yaml"
    definition = driver_definition(
        spec,
        max_size=MAX_VOLUME_SIZE,
        storage_class_file=str(storage_class),
        attributes_class_file=str(attributes_class) if attributes_class else None,
    )
    path.write_text(dump(definition))
    return path


def ginkgo_argv(tools: Tools, run: UpstreamRun, kubeconfig: Path, driver_file: Path) -> list[str]:
    return [
        tools["ginkgo"],
        f"--procs={run.procs}",
        f"--focus={run.focus}",
        f"--skip={'|'.join(run.skips)}",
        f"--timeout={round(run.timeout_seconds)}s",
        f"--output-dir={run.report_dir}",
        "--junit-report=junit.xml",
        "--no-color",
        tools["e2e.test"],
        "--",
        f"-kubeconfig={kubeconfig}",
        "-provider=skeleton",
        f"-storage.testdriver={driver_file}",
        # The local cluster runs no kube-system pods worth waiting for.
        "-minStartupPods=0",
    ]


def run_external_storage(
    tools: Tools,
    spec: DriverDeployment,
    kubeconfig: Path,
    run: UpstreamRun,
    progress: Callable[[str], None],
) -> RunSummary:
    """Run the suites; return their summary (also written as summary.md next to the
    JUnit report, with ginkgo's output in ginkgo.log)."""
    require_tools(tools)
    run.report_dir.mkdir(parents=True, exist_ok=True)
    driver_file = write_testdriver(spec, run.report_dir)
    argv = ginkgo_argv(tools, run, kubeconfig, driver_file)
    log = run.report_dir / "ginkgo.log"
    progress(f"running the External Storage suites ({run.procs} processes); output in {log}")
    started = time.monotonic()
    with open(log, "wb") as output:
        finished = subprocess.run(
            argv,
            stdout=output,
            stderr=subprocess.STDOUT,
            check=False,
            timeout=run.timeout_seconds + 120,
        )
    seconds = time.monotonic() - started
    junit = run.report_dir / "junit.xml"
    if not junit.exists():
        raise RuntimeError(f"ginkgo exited {finished.returncode} without a JUnit report; see {log}")
    summary = read_junit(junit, run.skips)
    summary.explanations.update(SKIP_EXPLANATIONS)
    title = f"External Storage suites against {spec.name}: ginkgo exit {finished.returncode}"
    text = summary.markdown(title) + f"\nWall time {seconds:.0f} s with {run.procs} processes.\n"
    (run.report_dir / "summary.md").write_text(text)
    progress(f"summary written to {run.report_dir / 'summary.md'}")
    return summary


def run_on_kind_cluster(
    run: UpstreamRun,
    *,
    name: str = "csi-upstream",
    keep: bool = False,
    progress: Callable[[str], None],
    image_options: Mapping[str, str | None] | None = None,
) -> RunSummary:
    """The same on a kind cluster (kind-config/suites.yaml: a control plane and three
    workers in two zones), csi-mock deployed in-cluster; needs the Docker engine
    (docker/engine.sh start). ``image_options``: ``images``, ``driver_image``,
    ``registry_mirror`` of ``ClusterOptions``."""
    image_options = image_options or {}
    from csi_harness._internal.providers.kind.cluster import KindCluster
    from csi_harness._internal.providers.kind.kind_cli import ImageArchive

    tools = Tools.locate()
    require_tools(tools)
    images = e2e_images(tools)
    spec = upstream_driver()
    provider = open_provider(
        ClusterOptions(
            provider="kind",
            name=name,
            keep=keep,
            images=image_options.get("images"),
            driver_image=image_options.get("driver_image"),
            registry_mirror=image_options.get("registry_mirror"),
        ),
        progress=progress,
    )
    with provider as cluster:
        assert isinstance(cluster, KindCluster)  # what the kind provider brings up
        for image in images:
            cluster.cli.load_image(ImageArchive(image.tarball))
        progress(f"e2e images loaded: {', '.join(t for i in images for t in i.tags)}")
        cluster.redeploy_driver(spec)  # The cluster's own (unsuffixed) driver.
        return run_external_storage(tools, spec, cluster.kubeconfig, run, progress)


def run_on_local_cluster(
    run: UpstreamRun,
    *,
    name: str = "csi-upstream",
    keep: bool = False,
    progress: Callable[[str], None],
) -> RunSummary:
    """Bring the upstream profile's local cluster up, run the suites, remove it
    (unless ``keep``)."""
    # Imported here: the local provider is only needed for this command.
    from csi_harness._internal.core.images import import_images
    from csi_harness._internal.providers.local.cluster import LocalCluster
    from csi_harness._internal.providers.local.config import LocalClusterConfig

    tools = Tools.locate()
    require_tools(tools)
    images = e2e_images(tools)
    spec = upstream_driver()
    config = LocalClusterConfig(
        name=name,
        simulated_nodes=0,
        zones=["zone-a"],
        driver=spec,
        # Specs check the node through a host-exec pod under this fixed path.
        kubelet_root_dir=Path("/var/lib/kubelet"),
    )
    with open_provider(
        ClusterOptions(local_config=config, keep=keep), progress=progress
    ) as cluster:
        assert isinstance(cluster, LocalCluster)  # what the local provider brings up
        for node in config.nodes():
            socket = cluster.layout.containerd_socket(node.name)
            import_images(Path(tools["ctr"]), str(socket), images)
        progress(f"e2e images imported: {', '.join(t for i in images for t in i.tags)}")
        try:
            summary = run_external_storage(tools, spec, cluster.kubeconfig, run, progress)
        except BaseException:
            with contextlib.suppress(OSError):  # the suites' error is the one to show
                keep_component_logs(cluster.log_dir, run.report_dir, progress)
            raise
        if summary.failed:
            keep_component_logs(cluster.log_dir, run.report_dir, progress)
        return summary


def keep_component_logs(log_dir: Path, report_dir: Path, progress: Callable[[str], None]) -> Path:
    """Copy the local cluster's component logs (kubelet, API server, driver, sidecars)
    into ``report_dir/cluster-logs``: the cluster and its logs go when the run ends, and
    a failed spec is often explained only there (a component that stopped)."""
    kept = report_dir / CLUSTER_LOGS
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(log_dir, kept, ignore=shutil.ignore_patterns("*.sock"))
    progress(f"component logs kept in {kept}")
    return kept
