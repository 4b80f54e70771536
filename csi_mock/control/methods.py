"""The CSI methods this driver serves, and their response fields (from the proto)."""

from __future__ import annotations

import fnmatch

from google.protobuf.descriptor import Descriptor

from csi_mock.proto import csi_pb2 as pb

SERVICES = ("Identity", "Controller", "Node")


def _responses() -> dict[str, Descriptor]:
    found: dict[str, Descriptor] = {}
    for service in SERVICES:
        for method in pb.DESCRIPTOR.services_by_name[service].methods:
            found[method.name] = method.output_type
    return found


RESPONSE_OF: dict[str, Descriptor] = _responses()


def methods_matching(pattern: str) -> list[str]:
    return sorted(name for name in RESPONSE_OF if fnmatch.fnmatchcase(name, pattern))
