"""Pod networking of kind clusters made from csi-mock's node image."""

from __future__ import annotations

import json
from collections.abc import Sequence

from csi_harness._internal.providers.kind import network
from csi_harness._internal.providers.kind.network import NodeAddressing

NODES = [
    NodeAddressing("c-control-plane", "172.18.0.2", "10.244.0.0/24"),
    NodeAddressing("c-worker", "172.18.0.3", "10.244.1.0/24"),
    NodeAddressing("c-worker2", "172.18.0.4", "10.244.2.0/24"),
]


def test_each_node_allocates_pod_addresses_from_its_own_pod_cidr() -> None:
    config = network.cni_config(NODES[1])
    ptp, portmap = config["plugins"]  # type: ignore[misc]
    assert ptp["type"] == "ptp" and portmap["type"] == "portmap"
    assert ptp["ipam"] == {
        "type": "host-local",
        "ranges": [[{"subnet": "10.244.1.0/24"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
    }


def test_routes_lead_to_every_other_node_and_never_to_itself() -> None:
    commands = network.route_commands(NODES[0], NODES)
    assert commands == [
        ["ip", "route", "replace", "10.244.1.0/24", "via", "172.18.0.3"],
        ["ip", "route", "replace", "10.244.2.0/24", "via", "172.18.0.4"],
    ]


def test_install_writes_the_config_then_the_routes_on_every_node() -> None:
    calls: list[tuple[str, list[str], str | None]] = []

    def run(node: str, argv: Sequence[str], stdin: str | None) -> str:
        calls.append((node, list(argv), stdin))
        return ""

    network.install(NODES, run)
    written = {node: json.loads(stdin) for node, argv, stdin in calls if stdin is not None}
    assert {n: c["plugins"][0]["ipam"]["ranges"][0][0]["subnet"] for n, c in written.items()} == {
        n.name: n.pod_cidr for n in NODES
    }
    routes = [(node, argv[3]) for node, argv, _ in calls if argv[:2] == ["ip", "route"]]
    assert len(routes) == len(NODES) * (len(NODES) - 1)
    assert ("c-worker", "10.244.1.0/24") not in routes
