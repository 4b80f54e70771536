"""The ``/metrics`` of a local cluster's own components, read on loopback at the ports
its run state records."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request

from csi_harness._internal.core.run_state import RunState
from csi_harness._internal.core.unsupported import Unsupported
from csi_harness._internal.providers.local.components import LOOPBACK, Layout


def snapshot_controller_metrics(layout: Layout, cluster: str) -> str:
    """The snapshot-controller's ``/metrics`` on loopback (a cluster brought up
    before the endpoint existed has none: Unsupported)."""
    state = RunState.load(layout.root)
    port = None if state is None else state.ports.get("snapshot-controller")
    if port is None:
        raise Unsupported(
            f"the snapshot-controller of cluster {cluster!r} serves no metrics: it was "
            "brought up by a csi-harness without the endpoint; bring it up again"
        )
    url = f"http://{LOOPBACK}:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


def controller_manager_metrics(layout: Layout, cluster: str) -> str:
    """The kube-controller-manager's ``/metrics`` on loopback (the path is allowed
    without credentials)."""
    state = RunState.load(layout.root)
    port = None if state is None else state.ports.get("controller-manager")
    if port is None:
        raise Unsupported(f"cluster {cluster!r} has no kube-controller-manager port")
    # It serves HTTPS with a certificate it made itself at start, signed by no CA
    # the harness knows; the peer is our own process on loopback.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    url = f"https://{LOOPBACK}:{port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as response:
            return str(response.read().decode())
    except urllib.error.HTTPError as exc:
        if exc.code == 403:
            raise Unsupported(
                f"the kube-controller-manager of cluster {cluster!r} does not serve "
                "/metrics without credentials: it was brought up by an older "
                "csi-harness; bring it up again"
            ) from None
        raise
