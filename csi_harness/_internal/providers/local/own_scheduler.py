"""A kube-scheduler of a test's own on a local cluster: a second process beside the
cluster's, serving only the profiles it is given (pods name one in
``spec.schedulerName``), so that no test restarts the cluster's scheduler."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import partial

import yaml

from csi_harness._internal.core.processes import Supervisor
from csi_harness._internal.core.tools import Tools
from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.kube.feature_gates import Component, format_feature_gates
from csi_harness._internal.kube.scheduler_pod import scheduler_configuration
from csi_harness._internal.providers.local import components as c
from csi_harness._internal.providers.local.config import LocalClusterConfig
from csi_harness._internal.providers.local.host import free_port, https_ok

NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?$")


@contextlib.contextmanager
def own_scheduler(
    supervisor: Supervisor,
    tools: Tools,
    config: LocalClusterConfig,
    layout: c.Layout,
    name: str,
    profiles: Sequence[Mapping[str, object]],
    feature_gates: Mapping[str, bool] | None = None,
) -> Iterator[None]:
    """Run kube-scheduler ``name`` with ``profiles`` (and the cluster scheduler's
    feature gates, ``feature_gates`` over them) until the block ends; it serves
    ``/readyz`` (informers synced) on entry."""
    if not NAME.match(name):
        raise ValueError(f"scheduler name {name!r} is not a DNS label of up to 52 characters")
    process = f"kube-scheduler-{name}"
    path = layout.configs / f"{process}.yaml"
    configuration = scheduler_configuration(profiles)
    configuration["clientConnection"] = {
        "kubeconfig": str(layout.component_kubeconfig("kube-scheduler"))
    }
    path.write_text(yaml.safe_dump(configuration, sort_keys=False))
    gates = {**config.feature_gates_for(Component.SCHEDULER), **(feature_gates or {})}
    port = free_port()
    argv = [
        tools["kube-scheduler"],
        f"--config={path}",
        f"--bind-address={c.LOOPBACK}",
        f"--secure-port={port}",
        "--profiling=false",
        *([f"--feature-gates={format_feature_gates(gates)}"] if gates else []),
    ]
    supervisor.start(process, argv)
    try:
        wait_for(
            f"kube-scheduler {name} /readyz",
            partial(https_ok, port, "/readyz"),
            timeout=config.timeout_seconds,
            interval=0.2,
            check=partial(supervisor.check_alive, [process]),
        )
        yield
    finally:
        supervisor.stop(process)
        path.unlink(missing_ok=True)
