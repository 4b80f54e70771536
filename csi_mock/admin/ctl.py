"""`csi-mock ctl`: the admin API from the command line.

Readable tables by default, `--json` for machines. Exit codes: 0 done, 1 refused by
the API or not reachable (the API's message, naming the field, on stderr), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from csi_mock.admin.client import AdminClient, AdminError
from csi_mock.admin.resources import FaultRuleView, Limits, PoolView, VolumeView, record_to_json
from csi_mock.model.duration import DurationError, parse_duration
from csi_mock.model.quantity import format_quantity
from csi_mock.observe.calls import CallRecord

SOCKET_ENV = "CSI_MOCK_ADMIN_SOCKET"
TOKEN_ENV = "CSI_MOCK_ADMIN_TOKEN"
DEFAULT_SOCKET = Path("/var/lib/csi-mock/admin.sock")
"""The driver's default: <state_dir>/admin.sock with state_dir /var/lib/csi-mock."""
_CAPACITY_ACTIONS = ("status", "freeze", "unfreeze")


class UsageError(Exception):
    """A command line the parser accepted but that makes no sense (exit 2)."""


@dataclass(frozen=True)
class Output:
    """What a command prints: `data` with --json, `text` otherwise."""

    data: Any
    text: str
    exit_code: int = 0


Command = Callable[[AdminClient, argparse.Namespace], Output]


# -- parsing ---------------------------------------------------------------------------


def _pair(value: str) -> tuple[str, str]:
    key, sep, rest = value.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{value!r} is not KEY=VALUE")
    return key, rest


def _override(value: str) -> tuple[str, int | float | str | bool]:
    """field=value; numbers and true/false are typed, anything else is a string."""
    key, text = _pair(value)
    try:
        parsed = json.loads(text)
    except ValueError:
        return key, text
    return key, parsed if isinstance(parsed, int | float | bool) else text


def _duration(value: str) -> float:
    """Seconds, or a Go duration such as 300ms, 2s, 1m30s."""
    try:
        seconds = parse_duration(value)
    except DurationError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"{value!r} is negative")
    return seconds


def _since(value: str) -> float:
    """Unix time, or a duration ago such as 90s, 5m, 2h."""
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return time.time() - parse_duration(value)
    except DurationError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is neither a unix time nor a duration such as 30s, 5m, 2h"
        ) from None


class _CommandParser(argparse.ArgumentParser):
    """A ctl command's parser: an argument such as `-1Gi` or `-5` is a value (which the
    command then refuses as negative), not an unknown option. argparse only takes
    plain negative numbers (`-5`) as values, so `pool resize fast -1Gi` would otherwise
    say the size is missing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\d")


def _global_options(parser: argparse.ArgumentParser, default: Any) -> None:
    """Where to reach the admin API and how to print, accepted before and after the
    command; after it they default to SUPPRESS so an absent one keeps the value given
    before the command."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--socket",
        type=Path,
        default=default,
        help=f"admin unix socket (default: ${SOCKET_ENV}, else {DEFAULT_SOCKET})",
    )
    where.add_argument(
        "--url", default=default, help="admin API over TCP, e.g. http://10.0.0.7:9809"
    )
    secret = parser.add_mutually_exclusive_group()
    secret.add_argument(
        "--token", default=default, help=f"bearer token for --url (default: ${TOKEN_ENV})"
    )
    secret.add_argument(
        "--token-file", type=Path, default=default, help="file holding the bearer token"
    )
    parser.add_argument(
        "--timeout",
        type=_duration,
        default=30.0 if default is None else default,
        help="seconds or a duration (default 30s)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=False if default is None else default,
        help="machine output (JSON)",
    )


def add_ctl_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `ctl` and its commands on the `csi-mock` parser."""
    after_command = _CommandParser(add_help=False)
    _global_options(after_command, default=argparse.SUPPRESS)
    ctl = commands.add_parser(
        "ctl",
        help="control a running driver through its admin API",
        description="Control a running driver through its admin API (docs/admin-api.md).",
    )
    _global_options(ctl, default=None)
    verbs = ctl.add_subparsers(
        dest="ctl_command", required=True, metavar="COMMAND", parser_class=_CommandParser
    )

    def leaf(
        group: argparse._SubParsersAction[_CommandParser],
        name: str,
        command: Command,
        help: str,
    ) -> argparse.ArgumentParser:
        parser = group.add_parser(name, help=help, description=help, parents=[after_command])
        parser.set_defaults(ctl_handler=command)
        return parser

    fault = verbs.add_parser("fault", help="fault rules").add_subparsers(
        dest="fault_command", required=True, metavar="COMMAND", parser_class=_CommandParser
    )
    add = leaf(fault, "add", fault_add, "add a rule at the end of the list")
    add.add_argument("--method", required=True, help="CSI method name or glob")
    add.add_argument("--code", help="fail with this gRPC status code")
    add.add_argument("--message", help="the error message (with --code)")
    add.add_argument(
        "--delay", type=_duration, help="wait before handling: seconds or a duration (300ms, 2s)"
    )
    add.add_argument("--hang", action="store_true", help="hang until the caller's deadline")
    add.add_argument(
        "--override",
        type=_override,
        action="append",
        metavar="FIELD=VALUE",
        help="set a response field (repeatable)",
    )
    add.add_argument("--volume", help="glob on the request's volume_id or name")
    add.add_argument("--node", help="glob on the request's node_id")
    add.add_argument(
        "--param", type=_pair, action="append", metavar="K=V", help="parameter (repeatable)"
    )
    add.add_argument(
        "--topology", type=_pair, action="append", metavar="K=V", help="label (repeatable)"
    )
    add.add_argument("--times", type=int, help="fire at most N times")
    add.add_argument("--skip", type=int, help="let the first K matches through")
    add.add_argument("--probability", type=float, help="fire with this probability")
    add.add_argument("--seed", type=int, help="random seed (reproducible firing)")
    add.add_argument("--id", help="rule id (default rule-N)")
    leaf(fault, "list", fault_list, "list the rules with their counters")
    leaf(fault, "show", fault_show, "show one rule").add_argument("id")
    leaf(fault, "rm", fault_rm, "remove a rule").add_argument("id")
    leaf(fault, "clear", fault_clear, "remove every rule")

    pool = verbs.add_parser("pool", help="pools and their accounting").add_subparsers(
        dest="pool_command", required=True, metavar="COMMAND", parser_class=_CommandParser
    )
    leaf(pool, "list", pool_list, "list the pools")
    leaf(pool, "show", pool_show, "show one pool").add_argument("name")
    resize = leaf(pool, "resize", pool_resize, "set a pool's size")
    resize.add_argument("name")
    resize.add_argument("size", help="bytes or a quantity, e.g. 20Gi")
    for name, command, what in (
        ("consume", pool_consume, "take space outside CSI (drift)"),
        ("release", pool_release, "give back space taken by consume"),
    ):
        parser = leaf(pool, name, command, what)
        parser.add_argument("name")
        parser.add_argument("bytes", help="bytes or a quantity, e.g. 1Gi")

    capacity = leaf(verbs, "capacity", capacity_command, "freeze or unfreeze GetCapacity")
    capacity.add_argument("action", nargs="?", default="status", choices=_CAPACITY_ACTIONS)

    limits = leaf(verbs, "limits", limits_command, "show or set the volume and attach limits")
    limits.add_argument("--max-volumes-per-node", type=int, metavar="N")
    limits.add_argument("--attach-limit", type=int, metavar="N")

    volumes = leaf(verbs, "volumes", volumes_command, "list volumes (all pages)")
    volumes.add_argument("--limit", type=int, help="one page of at most N volumes")
    volumes.add_argument("--after", type=int, metavar="SEQ", help="volumes after this seq")

    journal = leaf(verbs, "journal", journal_command, "recent calls, oldest first")
    journal.add_argument("--method", help="name or glob")
    journal.add_argument("--code", help="status code, e.g. RESOURCE_EXHAUSTED")
    journal.add_argument("--volume", help="glob on volume_id or name")
    journal.add_argument("--node", help="glob on node_id")
    journal.add_argument("--since", type=_since, help="unix time or a duration ago (5m)")
    journal.add_argument("--after", type=int, metavar="SEQ", help="records after this seq")
    journal.add_argument("--limit", type=int, help="the last N records")

    leaf(verbs, "metrics", metrics_command, "Prometheus metrics (text)")
    leaf(verbs, "health", health_command, "is the driver ready (exit 1 if not)")


def run_ctl(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    try:
        client = _client(args, env)
    except UsageError as error:
        print(f"csi-mock ctl: {error}", file=sys.stderr)
        return 2
    command: Command = args.ctl_handler
    try:
        with client:
            output = command(client, args)
    except UsageError as error:
        print(f"csi-mock ctl: {error}", file=sys.stderr)
        return 2
    except AdminError as error:
        print(f"csi-mock ctl: {_explain(error)}", file=sys.stderr)
        return 1
    try:
        print(json.dumps(output.data, indent=2) if args.json else output.text, flush=True)
    except BrokenPipeError:
        # The reader stopped early (`ctl journal | head -1`): nothing is wrong, so no
        # traceback; stdout goes to /dev/null so the interpreter's final flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return output.exit_code


def _client(args: argparse.Namespace, env: Mapping[str, str]) -> AdminClient:
    # Each option is exclusive with its pair on one side of the command; across the
    # command argparse cannot see both.
    for first, second in (("socket", "url"), ("token", "token_file")):
        if getattr(args, first) is not None and getattr(args, second) is not None:
            raise UsageError(
                f"--{first.replace('_', '-')} and --{second.replace('_', '-')} exclude each other"
            )
    token = args.token or env.get(TOKEN_ENV)
    if args.token_file is not None:
        try:
            token = args.token_file.read_text().strip()
        except OSError as error:
            raise UsageError(f"--token-file {args.token_file}: {error.strerror}") from None
    if args.url:
        return AdminClient(url=args.url, token=token, timeout=args.timeout)
    socket = args.socket or Path(env.get(SOCKET_ENV) or DEFAULT_SOCKET)
    return AdminClient(socket, timeout=args.timeout)


def _explain(error: AdminError) -> str:
    if error.field and not error.message.startswith(f"{error.field}:"):
        return f"{error.message} (field: {error.field})"
    return error.message


# -- commands --------------------------------------------------------------------------


def fault_add(client: AdminClient, args: argparse.Namespace) -> Output:
    if args.message is not None and args.code is None:
        raise UsageError("fault add: --message needs --code")
    rule = client.add_fault(
        args.method,
        id=args.id,
        code=args.code,
        message=args.message,
        delay=args.delay,
        hang=args.hang or None,
        override=dict(args.override) if args.override else None,
        volume=args.volume,
        node=args.node,
        parameters=dict(args.param) if args.param else None,
        topology=dict(args.topology) if args.topology else None,
        times=args.times,
        skip=args.skip,
        probability=args.probability,
        seed=args.seed,
    )
    return Output(rule.to_json(), _rules_table([rule]))


def fault_list(client: AdminClient, args: argparse.Namespace) -> Output:
    rules = client.faults()
    text = _rules_table(rules) if rules else "no fault rules"
    return Output([rule.to_json() for rule in rules], text)


def fault_show(client: AdminClient, args: argparse.Namespace) -> Output:
    rule = client.fault(args.id)
    return Output(rule.to_json(), _rules_table([rule]))


def fault_rm(client: AdminClient, args: argparse.Namespace) -> Output:
    rule = client.remove_fault(args.id)
    text = f"removed {rule.id} (matched {rule.matched}, fired {rule.fired})"
    return Output(rule.to_json(), text)


def fault_clear(client: AdminClient, args: argparse.Namespace) -> Output:
    removed = client.clear_faults()
    return Output({"removed": removed}, f"removed {removed} rule{'' if removed == 1 else 's'}")


def pool_list(client: AdminClient, args: argparse.Namespace) -> Output:
    pools = client.pools()
    text = _pools_table(pools) if pools else "no pools (the controller does not run here)"
    return Output([pool.to_json() for pool in pools], text)


def pool_show(client: AdminClient, args: argparse.Namespace) -> Output:
    return _pool_output(client.pool(args.name))


def pool_resize(client: AdminClient, args: argparse.Namespace) -> Output:
    return _pool_output(client.resize_pool(args.name, _amount(args.size, "size")))


def pool_consume(client: AdminClient, args: argparse.Namespace) -> Output:
    return _pool_output(client.consume(args.name, _amount(args.bytes, "bytes")))


def pool_release(client: AdminClient, args: argparse.Namespace) -> Output:
    return _pool_output(client.release(args.name, _amount(args.bytes, "bytes")))


def capacity_command(client: AdminClient, args: argparse.Namespace) -> Output:
    if args.action == "freeze":
        frozen = client.freeze_capacity()
    elif args.action == "unfreeze":
        frozen = client.unfreeze_capacity()
    else:
        frozen = client.capacity_frozen()
    text = "capacity: frozen (GetCapacity answers from a snapshot)" if frozen else "capacity: live"
    return Output({"frozen": frozen}, text)


def limits_command(client: AdminClient, args: argparse.Namespace) -> Output:
    if args.max_volumes_per_node is None and args.attach_limit is None:
        limits = client.limits()
    else:
        limits = client.set_limits(
            max_volumes_per_node=args.max_volumes_per_node, attach_limit=args.attach_limit
        )
    return Output(limits.to_json(), _limits_table(limits))


def volumes_command(client: AdminClient, args: argparse.Namespace) -> Output:
    if args.limit is not None:
        volumes = client.volumes(limit=args.limit, after=args.after).volumes
    else:
        volumes = []
        after: int | None = args.after
        while True:
            page = client.volumes(after=after)
            volumes.extend(page.volumes)
            if page.next_after is None:
                break
            after = page.next_after
    text = _volumes_table(volumes) if volumes else "no volumes"
    return Output([volume.to_json() for volume in volumes], text)


def journal_command(client: AdminClient, args: argparse.Namespace) -> Output:
    records = client.journal(
        method=args.method,
        code=args.code,
        volume=args.volume,
        node=args.node,
        since=args.since,
        after=args.after,
        limit=args.limit,
    )
    text = _journal_table(records) if records else "no matching calls"
    return Output([record_to_json(record) for record in records], text)


def metrics_command(client: AdminClient, args: argparse.Namespace) -> Output:
    text = client.metrics_text()
    return Output({"exposition": text}, text.rstrip("\n"))


def health_command(client: AdminClient, args: argparse.Namespace) -> Output:
    health = client.health()
    text = "ready" if health.ready else f"not ready: {health.failure or 'state still loading'}"
    registration = health.registration
    if registration is not None:
        if registration.registered is None:
            verdict = "waiting for the kubelet"
        elif registration.registered:
            verdict = "registered"
        else:
            verdict = f"refused: {registration.error or 'no reason given'}"
        text += f"\nkubelet registration ({registration.socket}): {verdict}"
    return Output(health.to_json(), text, exit_code=0 if health.ready else 1)


# -- rendering -------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Columns aligned on the widest cell, two spaces apart."""
    lines = [list(headers), *(list(row) for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def _amount(text: str, argument: str) -> int | str:
    """Digits travel as a number, quantities ("10Gi") as text for the API to parse; a
    negative amount is refused here (exit 2)."""
    if text.startswith("-"):
        raise UsageError(
            f"{argument} {text!r} is negative; give 0 or more bytes, or a quantity like 1Gi"
        )
    return int(text) if text.isdigit() else text


def _labels(mapping: Mapping[str, object] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in (mapping or {}).items()) or "-"


def _rules_table(rules: Sequence[FaultRuleView]) -> str:
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
    return " ".join(parts) or "-"


def _pools_table(pools: Sequence[PoolView]) -> str:
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


def _pool_output(pool: PoolView) -> Output:
    return Output(pool.to_json(), _pools_table([pool]))


def _limits_table(limits: Limits) -> str:
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


def _volumes_table(volumes: Sequence[VolumeView]) -> str:
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


def _journal_table(records: Sequence[CallRecord]) -> str:
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
