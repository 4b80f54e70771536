"""The `csi-mock ctl` commands: each calls the admin API and says what to print."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from csi_mock.admin.ctl.render import (
    condition_table,
    journal_table,
    limits_table,
    neighbours_table,
    pools_table,
    reported_health_table,
    rules_table,
    switches_table,
    volumes_table,
)
from csi_mock.admin.views import PoolView, record_to_json
from csi_mock.model.quantity import QuantityError, parse_quantity

if TYPE_CHECKING:
    # The client brings httpx (and, through httpx's own command line, click and rich):
    # a tenth of a second that `csi-mock serve`, which builds this parser too, must not
    # pay on every start. Commands import what they call when they run.
    from csi_mock.admin.client import AdminClient


class UsageError(Exception):
    """A command line the parser accepted but that makes no sense (exit 2)."""


@dataclass(frozen=True)
class Output:
    """What a command prints: `data` with --json, `text` otherwise."""

    data: Any
    text: str
    exit_code: int = 0


Command = Callable[["AdminClient", argparse.Namespace], Output]


def fault_add(client: AdminClient, args: argparse.Namespace) -> Output:
    if args.message is not None and args.code is None:
        raise UsageError("fault add: --message needs --code")
    if args.reply is not None and args.rescue is None:
        raise UsageError("fault add: --reply needs --rescue")
    from csi_mock.admin.client import FaultSpec

    spec = {key: _sent(getattr(args, key, None)) for key in FaultSpec.__optional_keys__}
    if args.rescue is not None:
        # --rescue any: no code, so that every failure is rescued
        code = {} if args.rescue.lower() == "any" else {"code": args.rescue}
        spec["rescue"] = {**code, "reply": args.reply or {}}
    rule = client.add_fault(args.method, **cast(FaultSpec, spec))
    return Output(rule.to_json(), rules_table([rule]))


def _sent(value: Any) -> Any:
    """An option's value as the API takes it: repeated K=V pairs as a mapping, an
    absent flag (False) or repeated option (None) as not given."""
    if isinstance(value, list):
        return dict(value)
    return None if value is False else value


def fault_list(client: AdminClient, args: argparse.Namespace) -> Output:
    rules = client.faults()
    text = rules_table(rules) if rules else "no fault rules"
    return Output([rule.to_json() for rule in rules], text)


def fault_show(client: AdminClient, args: argparse.Namespace) -> Output:
    rule = client.fault(args.id)
    return Output(rule.to_json(), rules_table([rule]))


def fault_rm(client: AdminClient, args: argparse.Namespace) -> Output:
    rule = client.remove_fault(args.id)
    text = f"removed {rule.id} (matched {rule.matched}, fired {rule.fired})"
    return Output(rule.to_json(), text)


def fault_clear(client: AdminClient, args: argparse.Namespace) -> Output:
    removed = client.clear_faults()
    return Output({"removed": removed}, f"removed {removed} rule{'' if removed == 1 else 's'}")


def reset_command(client: AdminClient, args: argparse.Namespace) -> Output:
    client.reset()
    return Output(
        {"reset": True},
        "reset: faults, pools, capacity, limits, switches, conditions and journal as at start-up",
    )


def pool_list(client: AdminClient, args: argparse.Namespace) -> Output:
    pools = client.pools()
    text = pools_table(pools) if pools else "no pools (the controller does not run here)"
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


def neighbours_command(client: AdminClient, args: argparse.Namespace) -> Output:
    if (args.name is None) != (args.action == "list"):
        raise UsageError("neighbours: pause and resume take a NAME, list none")
    if args.action == "pause":
        neighbours = [client.pause_neighbour(args.name)]
    elif args.action == "resume":
        neighbours = [client.resume_neighbour(args.name)]
    else:
        neighbours = client.neighbours()
    data = {"neighbours": [n.to_json() for n in neighbours]}
    return Output(data, neighbours_table(neighbours))


def limits_command(client: AdminClient, args: argparse.Namespace) -> Output:
    if args.max_volumes_per_node is None and args.attach_limit is None:
        limits = client.limits()
    else:
        limits = client.set_limits(
            max_volumes_per_node=args.max_volumes_per_node, attach_limit=args.attach_limit
        )
    return Output(limits.to_json(), limits_table(limits))


SWITCH_NAMES = {
    "controller_expansion": "ControllerExpandVolume works and EXPAND_VOLUME is advertised;"
    " false: UNIMPLEMENTED (node-only expansion)",
    "node_expansion": "NodeExpandVolume works and the node's EXPAND_VOLUME is advertised;"
    " false: UNIMPLEMENTED",
    "node_expansion_required": "ControllerExpandVolume's node_expansion_required",
    "online_expansion": "VolumeExpansion is ONLINE; false: OFFLINE, and expanding a volume"
    " attached to a node is FAILED_PRECONDITION",
    "volume_stats": "NodeGetVolumeStats works and GET_VOLUME_STATS is advertised;"
    " false: UNIMPLEMENTED",
}
"""The switches `ctl switches` sets, each with its --help."""


def switches_command(client: AdminClient, args: argparse.Namespace) -> Output:
    given = {name: getattr(args, name) for name in SWITCH_NAMES}
    if all(value is None for value in given.values()):
        switches = client.switches()
    else:
        switches = client.set_switches(**given)
    return Output(switches.to_json(), switches_table(switches))


def condition_command(client: AdminClient, args: argparse.Namespace) -> Output:
    if args.clear and (args.abnormal or args.message is not None):
        raise UsageError("--clear takes neither --abnormal nor --message")
    if args.clear:
        condition = client.clear_condition(args.volume_id)
    elif args.abnormal or args.message is not None:
        condition = client.set_condition(
            args.volume_id, abnormal=args.abnormal, message=args.message or ""
        )
    else:
        condition = client.condition(args.volume_id)
    return Output(condition.to_json(), condition_table(condition))


def reported_health_command(client: AdminClient, args: argparse.Namespace) -> Output:
    """`volume-health VOLUME_ID` or `storage-health`: shown, set (each --condition
    STATUS:Reason[:message] is one entry; --healthy sets none) or cleared."""
    entries = [_health_entry(value) for value in args.condition or []]
    if sum([bool(entries), args.healthy, args.clear]) > 1:
        raise UsageError("give one of --condition, --healthy and --clear")
    volume_id = getattr(args, "volume_id", "")
    if args.clear:
        view = client.clear_volume_health(volume_id) if volume_id else client.clear_storage_health()
    elif entries or args.healthy:
        if volume_id:
            view = client.set_volume_health(volume_id, entries)
        else:
            view = client.set_storage_health(entries)
    else:
        view = client.volume_health(volume_id) if volume_id else client.storage_health()
    return Output(view.to_json(), reported_health_table(view))


def _health_entry(value: str) -> dict[str, str]:
    status, _, rest = value.partition(":")
    reason, _, message = rest.partition(":")
    if not status or not reason:
        raise UsageError(f"--condition {value!r}: expected STATUS:Reason[:message]")
    return {"status": status, "reason": reason, "message": message}


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
    text = volumes_table(volumes) if volumes else "no volumes"
    return Output([volume.to_json() for volume in volumes], text)


def journal_command(client: AdminClient, args: argparse.Namespace) -> Output:
    from csi_mock.admin.client import JournalFilter

    query = {key: getattr(args, key) for key in JournalFilter.__optional_keys__}
    query["where"] = dict(args.where) if args.where else None
    records = client.journal(**cast(JournalFilter, query))
    text = journal_table(records) if records else "no matching calls"
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


def _amount(text: str, argument: str) -> int:
    """Bytes or a quantity ("10Gi") as bytes; one that is malformed or negative is a
    usage error (exit 2), as every argument the command line can check itself."""
    try:
        return parse_quantity(text)
    except QuantityError as error:
        raise UsageError(
            f"{argument} {error}; give 0 or more bytes, or a quantity like 1Gi"
        ) from None


def _pool_output(pool: PoolView) -> Output:
    return Output(pool.to_json(), pools_table([pool]))
