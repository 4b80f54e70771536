"""Kubernetes feature gates as every component takes them: ``NAME=true|false,...``,
and the components that take them."""

from __future__ import annotations

import enum


class Component(enum.StrEnum):
    """A Kubernetes component with feature gates of its own."""

    APISERVER = "kube-apiserver"
    CONTROLLER_MANAGER = "kube-controller-manager"
    SCHEDULER = "kube-scheduler"
    KUBELET = "kubelet"


def parse_feature_gates(text: str) -> dict[str, bool]:
    """``NAME=true|false,...`` (any case, blanks ignored) as a mapping; ValueError
    naming the first item that is not of that form."""
    gates: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or value.lower() not in ("true", "false") or not name:
            raise ValueError(f"{item!r} is not NAME=true|false")
        gates[name] = value.lower() == "true"
    return gates


def format_feature_gates(gates: dict[str, bool]) -> str:
    """The ``--feature-gates`` value of ``gates``, sorted by name."""
    return ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(gates.items()))
