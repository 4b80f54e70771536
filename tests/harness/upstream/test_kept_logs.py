"""A failed External Storage run keeps the local cluster's component logs: the cluster
and its log directory are removed when the run ends."""

from __future__ import annotations

import socket
from pathlib import Path

from csi_harness._internal.upstream.run import CLUSTER_LOGS, keep_component_logs


def test_the_logs_are_copied_under_the_report_directory(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "kubelet-node-1.log").write_text("E1129 kubelet stopped\n")
    (logs / "csi-mock-controller.log").write_text("serving\n")
    report = tmp_path / "report"
    report.mkdir()
    said: list[str] = []

    kept = keep_component_logs(logs, report, said.append)

    assert kept == report / CLUSTER_LOGS
    assert (kept / "kubelet-node-1.log").read_text() == "E1129 kubelet stopped\n"
    assert sorted(p.name for p in kept.iterdir()) == [
        "csi-mock-controller.log",
        "kubelet-node-1.log",
    ]
    assert said == [f"component logs kept in {kept}"]


def test_a_socket_in_the_log_directory_is_left_out_and_a_second_copy_replaces_the_first(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "etcd.log").write_text("first\n")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(logs / "admin.sock"))
    report = tmp_path / "report"
    report.mkdir()
    keep_component_logs(logs, report, lambda _: None)
    (logs / "etcd.log").write_text("second\n")

    kept = keep_component_logs(logs, report, lambda _: None)

    listener.close()
    assert sorted(p.name for p in kept.iterdir()) == ["etcd.log"]
    assert (kept / "etcd.log").read_text() == "second\n"
