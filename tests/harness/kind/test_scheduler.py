"""Restarting a kind cluster's kube-scheduler with another configuration."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from csi_harness._internal.providers.kind import scheduler
from csi_harness._internal.providers.kind.scheduler import (
    CONFIG_PATH,
    KUBEADM_KUBECONFIG,
    MANIFEST,
    SchedulerManifest,
)

KUBEADM_MANIFEST: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
    "spec": {
        "containers": [
            {
                "name": "kube-scheduler",
                "command": [
                    "kube-scheduler",
                    "--authentication-kubeconfig=/etc/kubernetes/scheduler.conf",
                    "--authorization-kubeconfig=/etc/kubernetes/scheduler.conf",
                    "--bind-address=127.0.0.1",
                    "--kubeconfig=/etc/kubernetes/scheduler.conf",
                    "--leader-elect=true",
                ],
                "volumeMounts": [{"name": "kubeconfig", "mountPath": KUBEADM_KUBECONFIG}],
            }
        ],
        "volumes": [{"name": "kubeconfig", "hostPath": {"path": KUBEADM_KUBECONFIG}}],
    },
}
SHAPE = {"profiles": [{"schedulerName": "default-scheduler", "pluginConfig": []}]}


def test_the_callers_configuration_cannot_redirect_the_kubeconfig() -> None:
    merged = scheduler.scheduler_configuration(
        {**SHAPE, "clientConnection": {"kubeconfig": "/elsewhere", "qps": 5}}
    )
    assert merged["clientConnection"] == {"kubeconfig": KUBEADM_KUBECONFIG, "qps": 5}
    assert merged["profiles"] == SHAPE["profiles"]
    assert merged["kind"] == "KubeSchedulerConfiguration"


def test_the_manifest_runs_the_scheduler_with_the_mounted_config() -> None:
    pod = scheduler.with_config(KUBEADM_MANIFEST)
    (container,) = pod["spec"]["containers"]
    assert f"--config={CONFIG_PATH}" in container["command"]
    assert not [a for a in container["command"] if a.startswith("--kubeconfig=")]
    assert "--leader-elect=true" in container["command"]
    mounted = {m["mountPath"] for m in container["volumeMounts"]}
    assert scheduler.CONFIG_DIR in mounted and KUBEADM_KUBECONFIG in mounted
    assert KUBEADM_MANIFEST["spec"]["containers"][0]["command"][-1] == "--leader-elect=true"


def test_applying_twice_keeps_one_mount_and_one_config_flag() -> None:
    pod = scheduler.with_config(scheduler.with_config(KUBEADM_MANIFEST))
    (container,) = pod["spec"]["containers"]
    assert [a for a in container["command"] if a.startswith("--config=")] == [
        f"--config={CONFIG_PATH}"
    ]
    assert [v["name"] for v in pod["spec"]["volumes"]].count(scheduler.VOLUME) == 1


class FakeNode:
    def __init__(self) -> None:
        self.files = {MANIFEST: yaml.safe_dump(KUBEADM_MANIFEST)}

    def run(self, argv: Sequence[str], stdin: str | None) -> str:
        if argv[0] == "cat":
            return self.files[argv[1]]
        if argv[0] == "sh":
            target = argv[2].rsplit(" ", 1)[-1]
            assert stdin is not None
            self.files[target] = stdin
        return ""


def test_apply_writes_config_and_manifest_and_restore_puts_kubeadms_back() -> None:
    node = FakeNode()
    original = node.files[MANIFEST]
    manifest = SchedulerManifest(node.run)
    manifest.apply(SHAPE)
    assert yaml.safe_load(node.files[CONFIG_PATH])["profiles"] == SHAPE["profiles"]
    assert f"--config={CONFIG_PATH}" in node.files[MANIFEST]
    manifest.apply({})
    assert node.files[MANIFEST] == original


def test_feature_gates_are_set_over_the_manifests_own_once() -> None:
    manifest = scheduler.with_config(KUBEADM_MANIFEST, {"A": True})
    (container,) = manifest["spec"]["containers"]
    container["command"].append("--feature-gates=B=true,A=true")
    pod = scheduler.with_config(manifest, {"A": False, "C": True})
    (container,) = pod["spec"]["containers"]
    gates = [a for a in container["command"] if a.startswith("--feature-gates=")]
    assert gates == ["--feature-gates=A=false,B=true,C=true"]


def test_gates_alone_rewrite_the_manifest_and_nothing_puts_kubeadms_back() -> None:
    node = FakeNode()
    original = node.files[MANIFEST]
    manifest = SchedulerManifest(node.run)
    manifest.apply({}, {"StorageCapacityScoring": False})
    assert "--feature-gates=StorageCapacityScoring=false" in node.files[MANIFEST]
    manifest.apply({}, {})
    assert node.files[MANIFEST] == original
