"""The `csi-mock ctl` command line: where the admin API is, and one parser a command."""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

from csi_mock.admin.ctl.commands import (
    SWITCH_NAMES,
    Command,
    capacity_command,
    condition_command,
    fault_add,
    fault_clear,
    fault_list,
    fault_rm,
    fault_show,
    health_command,
    journal_command,
    limits_command,
    metrics_command,
    neighbours_command,
    pool_consume,
    pool_list,
    pool_release,
    pool_resize,
    pool_show,
    reported_health_command,
    reset_command,
    switches_command,
    volumes_command,
)
from csi_mock.model.boolean import BooleanError, parse_bool
from csi_mock.model.duration import DurationError, parse_duration
from csi_mock.observe.field_path import FieldPathError, parse_condition, parse_path_prefix

SOCKET_ENV = "CSI_MOCK_ADMIN_SOCKET"
TOKEN_ENV = "CSI_MOCK_ADMIN_TOKEN"
DEFAULT_SOCKET = Path("/var/lib/csi-mock/admin.sock")
"""The driver's default: <state_dir>/admin.sock with state_dir /var/lib/csi-mock."""
_CAPACITY_ACTIONS = ("status", "freeze", "unfreeze")


def _pair(value: str) -> tuple[str, str]:
    key, sep, rest = value.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{value!r} is not KEY=VALUE")
    return key, rest


def _override(value: str) -> tuple[str, Any]:
    """PATH=VALUE; JSON numbers, true/false, lists and objects are typed, anything else
    is a string. The path ends at the first '=' outside brackets, so a map key may
    hold one."""
    path, end = _path_prefix(value, "FIELD=VALUE")
    if value[end : end + 1] != "=":
        raise argparse.ArgumentTypeError(f"{value!r} is not FIELD=VALUE")
    text = value[end + 1 :]
    try:
        parsed = json.loads(text)
    except ValueError:
        return path, text
    return path, parsed if isinstance(parsed, int | float | bool | list | dict) else text


_OPERATORS = (">=", "<=", "==", ">", "<", "=")


def _request_condition(value: str) -> tuple[str, str]:
    """PATH=GLOB, or PATH>N, PATH>=N, PATH<N, PATH<=N, PATH==N (N a number or a
    quantity such as 1Gi): as the API takes it, {PATH: GLOB} or {PATH: ">N"}."""
    path, end = _path_prefix(value, "PATH=GLOB or PATH>N")
    rest = value[end:]
    for operator in _OPERATORS:
        if rest.startswith(operator):
            return path, rest[1:] if operator == "=" else rest
    raise argparse.ArgumentTypeError(
        f"{value!r} is not PATH=GLOB or PATH followed by >, >=, <, <=, == and a number"
    )


def _path_prefix(value: str, form: str) -> tuple[str, int]:
    try:
        path, end = parse_path_prefix(value)
    except FieldPathError as error:
        raise argparse.ArgumentTypeError(f"{value!r} is not {form}: {error}") from None
    return path.text, end


def _json_object(value: str) -> dict[str, Any]:
    try:
        parsed = json.loads(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{value!r} is not JSON: {error}") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(f"{value!r} is not a JSON object")
    return parsed


def _boolean(value: str) -> bool:
    """The booleans `csi-mock serve` takes too (Go's strconv.ParseBool spellings)."""
    try:
        return parse_bool(value)
    except BooleanError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _limit(value: str) -> int:
    """A count limit: 0 for none, as `csi-mock serve`'s limit flags; negative refused."""
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"{count} is negative; give 0 (no limit) or more")
    return count


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


def _condition(value: str) -> tuple[str, str]:
    """PATH=GLOB, the path checked here so that a typo is a usage error naming it."""
    try:
        condition = parse_condition(value)
    except FieldPathError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return condition.path.text, condition.pattern


class _CommandParser(argparse.ArgumentParser):
    """A ctl command's parser: an argument such as `-1Gi` or `-5` is a value (which the
    command then refuses as negative), not an unknown option. argparse only takes
    plain negative numbers (`-5`) as values, so `pool resize fast -1Gi` would otherwise
    say the size is missing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\d")


_FAULT_OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--code", {"help": "fail with this gRPC status code"}),
    ("--message", {"help": "the error message (with --code)"}),
    (
        "--delay",
        {"type": _duration, "help": "wait before handling: seconds or a duration (300ms, 2s)"},
    ),
    ("--hang", {"action": "store_true", "help": "hang until the caller's deadline"}),
    (
        "--override",
        {
            "type": _override,
            "action": "append",
            "metavar": "PATH=VALUE",
            "help": "set a reply field, e.g. volume_condition.abnormal=true (repeatable)",
        },
    ),
    (
        "--rescue",
        {
            "metavar": "CODE",
            "help": "when the handler fails with CODE (or any), reply OK instead",
        },
    ),
    ("--reply", {"type": _json_object, "help": "the reply --rescue sends (JSON, default {})"}),
    ("--volume", {"help": "glob on the request's volume_id or name"}),
    ("--node", {"help": "glob on the request's node_id"}),
    (
        "--param",
        {
            "dest": "parameters",
            "type": _pair,
            "action": "append",
            "metavar": "K=V",
            "help": "parameter (repeatable)",
        },
    ),
    (
        "--topology",
        {"type": _pair, "action": "append", "metavar": "K=V", "help": "label (repeatable)"},
    ),
    (
        "--where",
        {
            "type": _request_condition,
            "action": "append",
            "metavar": "PATH=GLOB|PATH>N",
            "help": "a request field's condition: =GLOB, or >, >=, <, <=, == a number"
            " or quantity (repeatable)",
        },
    ),
    ("--times", {"type": int, "help": "fire at most N times"}),
    ("--skip", {"type": int, "help": "let the first K matches through"}),
    ("--probability", {"type": float, "help": "fire with this probability"}),
    ("--seed", {"type": int, "help": "random seed (reproducible firing)"}),
    ("--id", {"help": "rule id (default rule-N)"}),
)
"""`fault add`'s options besides --method: one for each key of the client's FaultSpec
(error as --code and --message), each stored under that key, so fault_add sends them
all without naming them again."""


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
        description="Control a running driver through its admin API: its unix socket"
        " <state_dir>/admin.sock (--socket), or its TCP listener, config key admin.tcp, with"
        " the bearer token of admin.token_file (--url, --token). Exit codes: 0 done, 1 refused"
        " by the driver or not reachable (its message, naming the field, on stderr), 2 usage.",
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
    for flag, options in _FAULT_OPTIONS:
        add.add_argument(flag, **options)
    leaf(fault, "list", fault_list, "list the rules with their counters")
    rule_id = "the rule's id (fault list shows them)"
    leaf(fault, "show", fault_show, "show one rule").add_argument("id", help=rule_id)
    leaf(fault, "rm", fault_rm, "remove a rule").add_argument("id", help=rule_id)
    leaf(fault, "clear", fault_clear, "remove every rule")

    pool = verbs.add_parser("pool", help="pools and their accounting").add_subparsers(
        dest="pool_command", required=True, metavar="COMMAND", parser_class=_CommandParser
    )
    leaf(pool, "list", pool_list, "list the pools")
    pool_name = "the pool's name (pool list shows them)"
    leaf(pool, "show", pool_show, "show one pool").add_argument("name", help=pool_name)
    resize = leaf(pool, "resize", pool_resize, "set a pool's size")
    resize.add_argument("name", help=pool_name)
    resize.add_argument("size", help="bytes or a quantity, e.g. 20Gi")
    for name, command, what in (
        ("consume", pool_consume, "take space outside CSI (drift)"),
        ("release", pool_release, "give back space taken by consume"),
    ):
        parser = leaf(pool, name, command, what)
        parser.add_argument("name", help=pool_name)
        parser.add_argument("bytes", help="bytes or a quantity, e.g. 1Gi")

    capacity = leaf(verbs, "capacity", capacity_command, "freeze or unfreeze GetCapacity")
    capacity.add_argument(
        "action",
        nargs="?",
        default="status",
        choices=_CAPACITY_ACTIONS,
        help="status (the default); freeze: GetCapacity answers from a snapshot; unfreeze: live",
    )

    neighbours = leaf(
        verbs, "neighbours", neighbours_command, "list, pause or resume programs of this pod"
    )
    neighbours.add_argument(
        "action",
        nargs="?",
        default="list",
        choices=("list", "pause", "resume"),
        help="list (the default); pause NAME: SIGSTOP it; resume NAME: SIGCONT it",
    )
    neighbours.add_argument("name", nargs="?", help="a program admin.neighbours names")

    limits = leaf(verbs, "limits", limits_command, "show or set the volume and attach limits")
    limits.add_argument(
        "--max-volumes-per-node",
        type=_limit,
        metavar="N",
        help="NodeGetInfo's max_volumes_per_node (0: no limit)",
    )
    limits.add_argument(
        "--attach-limit",
        type=_limit,
        metavar="N",
        help="attached volumes per node before ControllerPublishVolume is RESOURCE_EXHAUSTED"
        " (0: no limit); when > 0 also NodeGetInfo's max_volumes_per_node, unless"
        " --max-volumes-per-node is given",
    )

    switches = leaf(
        verbs, "switches", switches_command, "show or set the expansion and stats switches"
    )
    for name, text in SWITCH_NAMES.items():
        switches.add_argument(
            "--" + name.replace("_", "-"), dest=name, type=_boolean, metavar="BOOL", help=text
        )

    condition = leaf(
        verbs, "condition", condition_command, "show, set or clear a volume's condition"
    )
    volume_id = "the volume's ID (volumes lists them)"
    condition.add_argument("volume_id", help=volume_id)
    condition.add_argument("--abnormal", action="store_true", help="report it abnormal")
    condition.add_argument("--message", help="the condition's message")
    condition.add_argument("--clear", action="store_true", help="healthy again")

    volume_health = leaf(
        verbs, "volume-health", reported_health_command, "show, set or clear a volume's health"
    )
    volume_health.add_argument("volume_id", help=volume_id)
    storage_health = leaf(
        verbs,
        "storage-health",
        reported_health_command,
        "show, set or clear the storage backend's health (NodeGetStorageHealth)",
    )
    for health_verb in (volume_health, storage_health):
        health_verb.add_argument(
            "--condition",
            action="append",
            metavar="STATUS:Reason[:message]",
            help="an adverse condition, e.g. INACCESSIBLE:TargetGone:lost (repeatable)",
        )
        health_verb.add_argument("--healthy", action="store_true", help="set no condition")
        health_verb.add_argument("--clear", action="store_true", help="back to the default")

    leaf(verbs, "reset", reset_command, "back to how the driver started (an empty one only)")

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
    journal.add_argument(
        "--where",
        type=_condition,
        action="append",
        metavar="PATH=GLOB",
        help='a request field, e.g. volume_context["csi.storage.k8s.io/pod.name"]=web-0'
        " (repeatable; reply.FIELD for the reply; whole fields need journal_requests: whole)",
    )

    leaf(verbs, "metrics", metrics_command, "Prometheus metrics (text)")
    leaf(verbs, "health", health_command, "is the driver ready (exit 1 if not)")
