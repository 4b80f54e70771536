"""Running Kubernetes' "External Storage" e2e suites (e2e.test under ginkgo) against
csi-mock, and the local cluster profile they run on.

The profile has one real kubelet and no simulated nodes: the suites pick nodes from
every Ready, schedulable Node, and a simulated node never runs a pod. The images the
storage specs start (busybox, agnhost) are built here and imported under the names
e2e.test asks for (``e2e.test --list-images``).
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.deploy.spec import DriverDeployment
from harness.local.images import LocalImage, build_agnhost_image, build_busybox_image
from harness.local.tools import Tools, ToolsMissing
from harness.upstream.summary import RunSummary, read_junit
from harness.upstream.testdriver import driver_definition, dump, storage_class_manifest

UPSTREAM_TOOLS = ("e2e.test", "ginkgo", "agnhost")
FOCUS = r"External.Storage"
SKIP = r"\[Disruptive\]"
"""[Disruptive] specs stop or restart the kubelet through the node's service manager
(systemctl over SSH or a host exec); the local provider's kubelet is a process of the
harness, not a service."""
SKIP_EXPLANATIONS: dict[str, str] = {
    # Reasons as the suites word them -> why that is right for csi-mock here.
}
MAX_VOLUME_SIZE = "8Gi"


def upstream_driver() -> DriverDeployment:
    """The driver of an upstream run: one roomy pool on the node (the suites create
    hundreds of volumes of up to a few GiB), sizes up to MAX_VOLUME_SIZE."""
    return DriverDeployment(
        node_pool_size="200Gi", max_volume_size=MAX_VOLUME_SIZE, max_volumes_per_node=0
    )


@dataclass(frozen=True)
class UpstreamRun:
    """What to run and where the reports go."""

    report_dir: Path
    procs: int = 4
    focus: str = FOCUS
    skip: str = SKIP
    timeout_minutes: int = 60


def require_tools(tools: Tools) -> None:
    missing = [name for name in UPSTREAM_TOOLS if not (tools.bin_dir / name).exists()]
    if missing:
        raise ToolsMissing(
            f"missing in {tools.bin_dir}: {', '.join(missing)}; build them with"
            ' `make tools TOOLS="e2e ginkgo"`'
        )


SHELL_IMAGES = ("busybox", "glibc-dns-testing", "nginx")
"""e2e images the External Storage specs only run shell commands in (sh, dd,
sha256sum, base64, grep, a script written to the volume): busybox provides them, so
these names are given to the busybox image. Every version e2e.test lists is tagged."""


def e2e_images(tools: Tools) -> list[LocalImage]:
    """The images the External Storage specs start, under the exact names this
    e2e.test uses: busybox for the shell-only ones, agnhost built from its source."""
    listed = subprocess.run(
        [tools["e2e.test"], "--list-images"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.split()
    shell_tags = tuple(
        image
        for image in listed
        if any(f"/e2e-test-images/{name}:" in image for name in SHELL_IMAGES)
    )
    if not any("/busybox:" in tag for tag in shell_tags):
        raise LookupError("e2e.test --list-images names no e2e-test-images/busybox")
    agnhost = _newest(listed, "/e2e-test-images/agnhost:")
    return [
        build_busybox_image(tags=shell_tags),
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
    path = directory / "testdriver.yaml"
    definition = driver_definition(
        spec, max_size=MAX_VOLUME_SIZE, storage_class_file=str(storage_class)
    )
    path.write_text(dump(definition))
    return path


def ginkgo_argv(tools: Tools, run: UpstreamRun, kubeconfig: Path, driver_file: Path) -> list[str]:
    return [
        tools["ginkgo"],
        f"--procs={run.procs}",
        f"--focus={run.focus}",
        f"--skip={run.skip}",
        f"--timeout={run.timeout_minutes}m",
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
            timeout=run.timeout_minutes * 60 + 120,
        )
    seconds = time.monotonic() - started
    junit = run.report_dir / "junit.xml"
    if not junit.exists():
        raise RuntimeError(f"ginkgo exited {finished.returncode} without a JUnit report; see {log}")
    summary = read_junit(junit)
    summary.explanations.update(SKIP_EXPLANATIONS)
    title = f"External Storage suites against {spec.name}: ginkgo exit {finished.returncode}"
    text = summary.markdown(title) + f"\nWall time {seconds:.0f} s with {run.procs} processes.\n"
    (run.report_dir / "summary.md").write_text(text)
    progress(f"summary written to {run.report_dir / 'summary.md'}")
    return summary


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
    from harness.local.cluster import LocalCluster, format_teardown
    from harness.local.config import LocalClusterConfig
    from harness.local.images import import_images

    tools = Tools.locate()
    require_tools(tools)
    images = e2e_images(tools)
    spec = upstream_driver()
    config = LocalClusterConfig(name=name, simulated_nodes=0, zones=["zone-a"], driver=spec)
    cluster = LocalCluster(config, progress=progress)
    try:
        result = cluster.up()
        for node in config.nodes():
            socket = cluster.layout.containerd_socket(node.name)
            import_images(Path(tools["ctr"]), str(socket), images)
        progress(f"e2e images imported: {', '.join(t for i in images for t in i.tags)}")
        return run_external_storage(tools, spec, result.kubeconfig, run, progress)
    finally:
        if keep:
            progress(f"cluster {name!r} kept; KUBECONFIG={cluster.kubeconfig}")
        else:
            progress(f"cluster {name!r} removed: {format_teardown(cluster.down())}")
