"""Random tie-breaks for kube-scheduler 1.37, through a scheduler extender that scores
every node 0.

kube-scheduler picks the node with the highest total score; among nodes with equal
scores it means to pick at random (``NodePluginScores.Randomizer``). In 1.37.1 that
randomizer is set only for nodes an extender scored (``prioritizeNodes`` in
``pkg/scheduler/schedule_one.go``; kubernetes PR 141024 would set it for every node).
Without an extender, ties go to whichever feasible node comes first in a list that the
parallel filter builds roughly in the cluster's node order. Once every node's resource
scores have saturated (pods without requests count 100m CPU and 200MB each, so a
simulated node of 4 CPUs and 8Gi saturates at about 40 pods), all nodes tie and the
same few nodes are picked again and again.

An extender that answers every prioritize call with 0 for every node changes no score
and makes kube-scheduler draw a randomizer for every node: ties are then broken at
random, as earlier releases did. ``--random-tie-break`` runs one beside each run.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

PRIORITIZE = "prioritize"


def _node_names(args: dict[str, Any]) -> list[str]:
    """The nodes of an ExtenderArgs: ``NodeNames`` (node-cache-capable extenders) or
    the names in ``Nodes.items``."""
    names = args.get("NodeNames")
    if names is not None:
        return [str(n) for n in names]
    nodes = args.get("Nodes") or {}
    return [str(item["metadata"]["name"]) for item in nodes.get("items") or []]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            if self.path.rstrip("/").rsplit("/", 1)[-1] != PRIORITIZE:
                raise ValueError(f"no verb {self.path!r}: only {PRIORITIZE}")
            names = _node_names(json.loads(self.rfile.read(length) or b"{}"))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            body = json.dumps({"error": str(exc)}).encode()
            self.send_response(400)
        else:
            body = json.dumps([{"Host": name, "Score": 0} for name in names]).encode()
            self.send_response(200)
            self.server.calls += 1
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    calls = 0


class TieBreakExtender:
    """A no-op prioritize extender on loopback, for the lifetime of a ``with`` block."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="tie-break-extender", daemon=True
        )

    @property
    def calls(self) -> int:
        """Prioritize calls answered so far."""
        return self._server.calls

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def scheduler_config(self) -> dict[str, Any]:
        """What to merge into the KubeSchedulerConfiguration. ``ignorable``: a failed
        call is skipped, as if the extender were not there, rather than failing the
        pod's scheduling."""
        return {
            "extenders": [
                {
                    "urlPrefix": self.url,
                    "prioritizeVerb": PRIORITIZE,
                    "weight": 1,
                    "nodeCacheCapable": True,
                    "ignorable": True,
                    "httpTimeout": "5s",
                }
            ]
        }

    def __enter__(self) -> TieBreakExtender:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
