"""Pod networking for kind clusters made from csi-mock's node image.

kind's own CNI (kindnetd) cannot be built here (the module proxy refuses it), so the
cluster is created with ``networking.disableDefaultCNI: true`` and this module does
what kindnetd would for a single docker network: on every node, a ptp CNI configuration
for the node's ``spec.podCIDR`` (host-local IPAM; ptp, host-local and portmap are in
every kind node image, so a user's own node image works too), and a route to every
other node's pod range through that node's address. All nodes share one L2 network,
so no encapsulation is needed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

CNI_CONFIG_PATH = "/etc/cni/net.d/10-csi-mock.conflist"
CNI_VERSION = "1.0.0"


@dataclass(frozen=True)
class NodeAddressing:
    name: str
    address: str
    """The node's InternalIP on the docker network."""
    pod_cidr: str


Exec = Callable[[str, Sequence[str], str | None], str]
"""Run argv in the named node container (with stdin text, or None); return stdout."""


def cni_config(node: NodeAddressing) -> dict[str, object]:
    """The node's CNI configuration list: ptp (a veth per pod, routed by the node) +
    host-local over its pod range, portmap for hostPort pods."""
    return {
        "cniVersion": CNI_VERSION,
        "name": "csi-mock-kind",
        "plugins": [
            {
                "type": "ptp",
                # Traffic leaving the pod ranges is masqueraded as the node.
                "ipMasq": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": node.pod_cidr}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def route_commands(node: NodeAddressing, others: Sequence[NodeAddressing]) -> list[list[str]]:
    """``ip route replace`` for every other node's pod range (idempotent)."""
    return [
        ["ip", "route", "replace", other.pod_cidr, "via", other.address]
        for other in others
        if other.name != node.name
    ]


def install(nodes: Sequence[NodeAddressing], run: Exec) -> None:
    """Write every node's CNI configuration and routes."""
    for node in nodes:
        run(node.name, ["mkdir", "-p", "/etc/cni/net.d"], None)
        config = json.dumps(cni_config(node), indent=2) + "\n"
        run(
            node.name,
            [
                "sh",
                "-c",
                f"cat > {CNI_CONFIG_PATH}.tmp && mv {CNI_CONFIG_PATH}.tmp {CNI_CONFIG_PATH}",
            ],
            config,
        )
        for argv in route_commands(node, nodes):
            run(node.name, argv, None)
