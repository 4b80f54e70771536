"""One CSI call on a csi-mock pod's own socket, made inside the pod with ``kubectl exec``.

The socket is a unix socket in the pod (or on its node), out of the harness's reach;
the driver image has Python and csi_mock's protobuf modules, so a short program run
there makes the call. Request and answer cross as protobuf JSON, so both ends are
typed messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from google.protobuf import json_format
from google.protobuf.message import Message

from csi_harness._internal.core.commands import CommandFailed, run_command

CommandRunner = Callable[[Sequence[str]], str]
"""Runs a command to completion and returns its stdout, or raises CommandFailed."""

ReplyT = TypeVar("ReplyT", bound=Message)

# argv: service ("Controller", "Node", "Identity"), method, request JSON, endpoint, timeout.
CSI_CALL_PROGRAM = """\
import sys
import grpc
from google.protobuf import json_format
from csi_mock.proto import csi_pb2, csi_pb2_grpc
service, method, request, endpoint, timeout = sys.argv[1:6]
with grpc.insecure_channel(endpoint) as channel:
    stub = getattr(csi_pb2_grpc, service + "Stub")(channel)
    message = json_format.Parse(request, getattr(csi_pb2, method + "Request")())
    reply = getattr(stub, method)(message, timeout=float(timeout))
print(json_format.MessageToJson(reply, preserving_proto_field_name=True, indent=None))
"""


EXEC_TIMEOUT = 60.0
"""Seconds a ``kubectl exec`` of the default runner may take."""


def run_exec(argv: Sequence[str]) -> str:
    """The default ``CommandRunner``: ``run_command`` within ``EXEC_TIMEOUT``."""
    return run_command(argv, timeout=EXEC_TIMEOUT)


@dataclass(frozen=True)
class PodCsiCaller:
    """Makes CSI calls inside the pods of one namespace."""

    kubectl: str
    kubeconfig: Path
    namespace: str
    container: str
    endpoint: str
    """The CSI endpoint as the container sees it, e.g. unix:///csi/csi.sock."""
    run: CommandRunner = run_exec
    timeout: float = 10.0

    def argv(self, pod: str, service: str, method: str, request: Message) -> list[str]:
        request_json = json_format.MessageToJson(
            request, preserving_proto_field_name=True, indent=None
        )
        return [
            self.kubectl,
            f"--kubeconfig={self.kubeconfig}",
            f"--namespace={self.namespace}",
            "exec",
            pod,
            f"--container={self.container}",
            "--",
            "python3",
            "-c",
            CSI_CALL_PROGRAM,
            service,
            method,
            request_json,
            self.endpoint,
            str(self.timeout),
        ]

    def call(
        self, pod: str, service: str, method: str, request: Message, reply_type: type[ReplyT]
    ) -> ReplyT:
        """``service.method(request)`` on ``pod``'s CSI socket; the reply as ``reply_type``."""
        argv = self.argv(pod, service, method, request)
        output = self.run(argv)
        lines = output.strip().splitlines()
        if not lines:
            raise CommandFailed(argv, 0, f"{method} on {pod} printed nothing")
        # The last line: anything the interpreter printed before it is not the answer.
        return json_format.Parse(lines[-1], reply_type(), ignore_unknown_fields=True)
