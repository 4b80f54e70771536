"""Restarting a kind cluster's kube-scheduler with another configuration.

kube-scheduler is a static pod of the control-plane node: the kubelet runs what
``/etc/kubernetes/manifests/kube-scheduler.yaml`` says and restarts it when the file
changes. ``SchedulerManifest`` rewrites that file inside the node container (through
``docker exec``): a KubeSchedulerConfiguration at ``CONFIG_PATH`` (the caller's mapping
merged over a base that keeps kubeadm's kubeconfig), ``--config`` pointing at it, and a
hostPath mount of it. ``restore`` puts the manifest kubeadm wrote back.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import yaml

from csi_harness._internal.deploy.spec import deep_merge
from csi_harness._internal.kube.feature_gates import format_feature_gates, parse_feature_gates

MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"
CONFIG_DIR = "/etc/kubernetes/csi-harness"
CONFIG_PATH = f"{CONFIG_DIR}/kube-scheduler-config.yaml"
KUBEADM_KUBECONFIG = "/etc/kubernetes/scheduler.conf"
VOLUME = "csi-harness-scheduler-config"

Exec = Callable[[Sequence[str], str | None], str]
"""Run argv in the control-plane node (stdin text or None); return stdout."""


def scheduler_configuration(scheduler: Mapping[str, object]) -> dict[str, Any]:
    """``scheduler`` merged over a base whose kubeconfig is kubeadm's (the caller's
    configuration cannot point the scheduler elsewhere)."""
    base: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": KUBEADM_KUBECONFIG},
    }
    merged = deep_merge(base, dict(scheduler))
    merged["clientConnection"]["kubeconfig"] = KUBEADM_KUBECONFIG
    return merged


def with_config(
    manifest: Mapping[str, Any], feature_gates: Mapping[str, bool] | None = None
) -> dict[str, Any]:
    """The static pod ``manifest`` running kube-scheduler with ``--config=CONFIG_PATH``
    (any earlier ``--config`` and ``--kubeconfig`` dropped: the file names the
    kubeconfig) and the file mounted read-only; with ``feature_gates``, those set
    over the manifest's own ``--feature-gates``."""
    pod = copy.deepcopy(dict(manifest))
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "kube-scheduler"]
    command = [
        arg
        for arg in container["command"]
        if not arg.startswith(
            (
                "--config=",
                "--kubeconfig=",
                "--authentication-kubeconfig=",
                "--authorization-kubeconfig=",
            )
        )
    ]
    if feature_gates:
        gates = merged_gates(command, feature_gates)
        command = [arg for arg in command if not arg.startswith("--feature-gates=")]
        command.append(f"--feature-gates={format_feature_gates(gates)}")
    # kubeadm's authn/authz kubeconfigs are the same file; keep them explicit.
    command += [
        f"--config={CONFIG_PATH}",
        f"--authentication-kubeconfig={KUBEADM_KUBECONFIG}",
        f"--authorization-kubeconfig={KUBEADM_KUBECONFIG}",
    ]
    container["command"] = command
    mounts = [m for m in container.get("volumeMounts", []) if m["name"] != VOLUME]
    container["volumeMounts"] = [
        *mounts,
        {"name": VOLUME, "mountPath": CONFIG_DIR, "readOnly": True},
    ]
    volumes = [v for v in pod["spec"].get("volumes", []) if v["name"] != VOLUME]
    pod["spec"]["volumes"] = [
        *volumes,
        {"name": VOLUME, "hostPath": {"path": CONFIG_DIR, "type": "Directory"}},
    ]
    return pod


def merged_gates(command: Sequence[str], feature_gates: Mapping[str, bool]) -> dict[str, bool]:
    """The manifest's ``--feature-gates`` with ``feature_gates`` set over them."""
    gates: dict[str, bool] = {}
    for arg in command:
        if arg.startswith("--feature-gates="):
            gates.update(parse_feature_gates(arg.split("=", 1)[1]))
    return {**gates, **feature_gates}


class SchedulerManifest:
    """The control-plane node's kube-scheduler manifest, changed and put back."""

    def __init__(self, run: Exec) -> None:
        self._run = run
        self._original: str | None = None

    def apply(
        self, scheduler: Mapping[str, object], feature_gates: Mapping[str, bool] | None = None
    ) -> None:
        """Write the configuration and the manifest that uses it, with
        ``feature_gates`` set (the kubelet then replaces the scheduler pod); with
        neither, kubeadm's manifest is put back."""
        if not scheduler and not feature_gates:
            self.restore()
            return
        self._run(["mkdir", "-p", CONFIG_DIR], None)
        if self._original is None:
            self._original = self._run(["cat", MANIFEST], None)
        config = yaml.safe_dump(scheduler_configuration(scheduler), sort_keys=False)
        self._write(CONFIG_PATH, config)
        manifest = with_config(yaml.safe_load(self._original), feature_gates)
        self._write(MANIFEST, yaml.safe_dump(manifest, sort_keys=False))

    def restore(self) -> None:
        if self._original is not None:
            self._write(MANIFEST, self._original)
            self._original = None

    def _write(self, path: str, text: str) -> None:
        # Written beside CONFIG_DIR and renamed, so the kubelet never reads half a file
        # (nor, in its manifest directory, a temporary file as one more static pod).
        temporary = f"{CONFIG_DIR}/.{path.rsplit('/', 1)[-1]}.tmp"
        self._run(["sh", "-c", f"cat > {temporary} && mv {temporary} {path}"], text)
