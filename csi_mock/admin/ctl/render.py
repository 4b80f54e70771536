"""How `csi-mock ctl` prints: aligned tables of rules, pools, limits, volumes, calls."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from csi_mock.admin.views import (
    ConditionView,
    FaultRuleView,
    HealthView,
    Limits,
    PoolView,
    SwitchesView,
    VolumeView,
)
from csi_mock.host.neighbours import Neighbour
from csi_mock.model.quantity import format_quantity
from csi_mock.observe.calls import CallRecord


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Columns aligned on the widest cell, two spaces apart."""
    lines = [list(headers), *(list(row) for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def _labels(mapping: Mapping[str, object] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in (mapping or {}).items()) or "-"


def rules_table(rules: Sequence[FaultRuleView]) -> str:
    return table(
        ["ID", "METHOD", "ACTION", "FIRING", "MATCH", "MATCHED", "FIRED"],
        (
            [
                rule.id,
                rule.method,
                rule.action,
                _firing(rule),
                _predicates(rule),
                str(rule.matched),
                str(rule.fired),
            ]
            for rule in rules
        ),
    )


def _firing(rule: FaultRuleView) -> str:
    parts = []
    if rule.skip:
        parts.append(f"skip {rule.skip}")
    if rule.times is not None:
        parts.append(f"{rule.times}x")
    if rule.probability < 1:
        parts.append(f"p={rule.probability:g}" + (f" seed={rule.seed}" if rule.seed else ""))
    return ", ".join(parts) or "always"


def _predicates(rule: FaultRuleView) -> str:
    parts = []
    if rule.volume is not None:
        parts.append(f"volume={rule.volume}")
    if rule.node is not None:
        parts.append(f"node={rule.node}")
    parts.extend(f"param:{k}={v}" for k, v in (rule.parameters or {}).items())
    parts.extend(f"topology:{k}={v}" for k, v in (rule.topology or {}).items())
    parts.extend(f"{k}{_condition(v)}" for k, v in (rule.where or {}).items())
    return " ".join(parts) or "-"


def _condition(condition: str | int | float | bool) -> str:
    """How `ctl fault add --where` spells a condition: PATH>1Gi, PATH=GLOB."""
    if isinstance(condition, bool):
        return "=true" if condition else "=false"
    if isinstance(condition, int | float):
        return f"=={condition}"
    return condition if condition[:1] in ("<", ">") or condition[:2] == "==" else f"={condition}"


def pools_table(pools: Sequence[PoolView]) -> str:
    return table(
        [
            "NAME",
            "SEGMENT",
            "KINDS",
            "ALLOCATION",
            "TOTAL",
            "USED",
            "EXTERNAL",
            "FREE",
            "LARGEST-EXTENT",
            "MAX-VOLUME",
        ],
        (
            [
                pool.name,
                _labels(pool.segment),
                ",".join(pool.kinds),
                pool.allocation,
                format_quantity(pool.total),
                format_quantity(pool.used),
                format_quantity(pool.external),
                format_quantity(pool.free),
                format_quantity(pool.largest_free_extent),
                _labels({k: format_quantity(v) for k, v in pool.max_volume_size.items()}),
            ]
            for pool in pools
        ),
    )


def limits_table(limits: Limits) -> str:
    def shown(value: int | None) -> str:
        if value is None:
            return "- (service not running here)"
        return "0 (no limit)" if value == 0 else str(value)

    return table(
        ["LIMIT", "VALUE"],
        [
            ["max_volumes_per_node", shown(limits.max_volumes_per_node)],
            ["attach_limit", shown(limits.attach_limit)],
        ],
    )


def neighbours_table(neighbours: Sequence[Neighbour]) -> str:
    if not neighbours:
        return "no neighbours: admin.neighbours names no program of this pod to pause"
    return table(
        ["PROGRAM", "PIDS", "STATE"],
        (
            [n.name, ",".join(map(str, n.pids)) or "-", "paused" if n.paused else "running"]
            for n in neighbours
        ),
    )


def switches_table(switches: SwitchesView) -> str:
    return table(
        ["SWITCH", "VALUE"],
        [[name, str(on).lower()] for name, on in switches.to_json().items()],
    )


def condition_table(condition: ConditionView) -> str:
    state = "abnormal" if condition.abnormal else "normal"
    return table(
        ["VOLUME", "CONDITION", "MESSAGE"], [[condition.volume_id, state, condition.message]]
    )


def reported_health_table(view: HealthView) -> str:
    subject = view.volume_id or "(storage backend)"
    origin = "set" if view.set else "default"
    rows = [[subject, e["status"], e["reason"], e.get("message", ""), origin] for e in view.entries]
    return table(
        ["SUBJECT", "STATUS", "REASON", "MESSAGE", "ORIGIN"],
        rows or [[subject, "healthy", "", "", origin]],
    )


def volumes_table(volumes: Sequence[VolumeView]) -> str:
    return table(
        ["SEQ", "NAME", "ID", "POOL", "KIND", "SIZE", "ACCESS", "ATTACHED-TO", "PUBLISHED"],
        (
            [
                str(volume.seq),
                volume.name,
                volume.id,
                volume.pool,
                volume.kind,
                format_quantity(volume.size),
                volume.access_type,
                ",".join(volume.published_nodes) or "-",
                str(len(volume.target_paths)) if volume.target_paths else "-",
            ]
            for volume in volumes
        ),
    )


def journal_table(records: Sequence[CallRecord]) -> str:
    return table(
        ["SEQ", "TIME", "METHOD", "CODE", "MS", "FAULT", "VOLUME", "NODE", "MESSAGE"],
        (
            [
                str(record.seq),
                datetime.fromtimestamp(record.time).strftime("%H:%M:%S.%f")[:-3],
                record.method,
                record.code,
                f"{record.duration_ms:.1f}",
                record.fault or "-",
                str(record.request.get("volume_id") or record.request.get("name") or "-"),
                str(record.request.get("node_id") or "-"),
                record.message or "",
            ]
            for record in records
        ),
    )
