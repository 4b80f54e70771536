"""Restarting one component of a running local cluster and waiting until it is back:
kube-scheduler with a new configuration, a node's kubelet as its service manager would."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from functools import partial

import yaml
from lightkube import Client

from csi_harness._internal.core.processes import Supervisor
from csi_harness._internal.core.tools import Tools
from csi_harness._internal.core.unsupported import Unsupported
from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.kube.nodes import heartbeat_since
from csi_harness._internal.providers.local.components import (
    Layout,
    scheduler_argv,
    scheduler_configuration,
)
from csi_harness._internal.providers.local.config import LocalClusterConfig
from csi_harness._internal.providers.local.host import http_ok, https_ok


def restart_scheduler(
    supervisor: Supervisor, tools: Tools, config: LocalClusterConfig, layout: Layout
) -> None:
    """Write kube-scheduler's configuration file from ``config``, restart it with the
    command line ``config`` gives, and wait until it serves /healthz."""
    (layout.configs / "kube-scheduler.yaml").write_text(
        yaml.safe_dump(scheduler_configuration(config, layout), sort_keys=False)
    )
    supervisor.stop("kube-scheduler")
    supervisor.start(
        "kube-scheduler",
        scheduler_argv(tools, config, layout, supervisor.state.ports),
    )
    port = supervisor.state.ports["scheduler"]
    wait_for(
        "kube-scheduler /healthz",
        partial(https_ok, port, "/healthz"),
        timeout=config.timeout_seconds,
        interval=0.2,
        check=partial(supervisor.check_alive, ["kube-scheduler"]),
    )


def restart_kubelet(
    supervisor: Supervisor,
    tools: Tools,
    kube: Client,
    node: str,
    *,
    cluster: str,
    timeout: float,
) -> None:
    """Stop ``node``'s kubelet and start it again with the same arguments; wait until it
    serves /healthz and has posted the node's status again. A node without a kubelet
    (simulated) is Unsupported."""
    name = f"kubelet-{node}"
    record = supervisor.state.processes.get(name)
    if record is None:
        raise Unsupported(f"node {node!r} of cluster {cluster!r} runs no kubelet")
    stopped = datetime.now(UTC).replace(microsecond=0)
    supervisor.stop(name)
    path = os.environ.get("PATH", "/usr/bin:/bin")
    supervisor.start(name, record.argv, env={"PATH": f"{tools.bin_dir}:{path}"})
    check = partial(supervisor.check_alive, [name])
    port = supervisor.state.ports[f"kubelet-healthz-{node}"]
    wait_for(
        f"the kubelet of {node} to serve /healthz",
        partial(http_ok, port, "/healthz"),
        timeout=timeout,
        interval=0.2,
        check=check,
    )
    wait_for(
        f"the kubelet of {node} to post the node's status after {stopped:%H:%M:%S}",
        partial(heartbeat_since, kube, node, stopped),
        timeout=timeout,
        interval=0.2,
        check=check,
    )
