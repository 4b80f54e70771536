"""hostpathplugin's flags (``csi-mock serve``) with hostpathplugin's meaning, turned
into the one validated ``DriverConfig`` per instance: the configuration file first, then
the flags over it, every problem found before any is reported (docs/hostpath-flags.md).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from csi_mock.config import ConfigError, DriverConfig, load_config, validate_config
from csi_mock.go_flags import Refused, go_int
from csi_mock.model.quantity import QuantityError, parse_quantity

HOSTPATH_MAX_VOLUME_SIZE = 1 << 40
"""hostpathplugin's --max-volume-size default (1Ti)."""

T = TypeVar("T")


_KEY_OF_FLAG = {
    "mode": "mode",
    "nodeid": "node.id",
    "drivername": "name",
    "statedir": "state_dir",
    "backend_dir": "backend_dir",
    "maxvolumespernode": "node.max_volumes_per_node",
    "attach_limit": "controller.attach_limit",
    "enable_attach": "attach_required",
    "enable_topology": "topology",
    "log_level": "log_level",
    "plugins_registry": "node.registration.plugins_registry",
    "kubelet_registration_path": "node.registration.kubelet_endpoint",
}
"""Flags (argparse attribute names) that set one configuration key each."""


def _flag_name(attribute: str) -> str:
    return "--" + attribute.replace("_", "-")


def overrides_from_flags(
    args: argparse.Namespace, env: dict[str, str], problems: list[str]
) -> dict[str, Any]:
    """Translate flags (and CSI_ENDPOINT) into dotted configuration keys; a flag that
    cannot be translated is left out and its problem added to `problems`."""
    overrides: dict[str, Any] = {}
    for attribute, key in _KEY_OF_FLAG.items():
        value = getattr(args, attribute)
        if value is not None:
            overrides[key] = str(value) if isinstance(value, Path) else value
    for attribute, key in (
        ("maxvolumespernode", "node.max_volumes_per_node"),
        ("attach_limit", "controller.attach_limit"),
    ):
        count = getattr(args, attribute)
        if count is not None and count < 0:
            del overrides[key]
            problems.append(
                "--attach-limit: -1 (hostpathplugin's random max_volumes_per_node between 1"
                " and 10 on every NodeGetInfo) is not supported; give the limit itself"
                if (attribute, count) == ("attach_limit", -1)
                else f"{_flag_name(attribute)}: {count} is negative; give 0 (no limit) or more"
            )
    # hostpathplugin: only a positive limit counts attachments, and it replaces
    # --maxvolumespernode in NodeGetInfo, so the kubelet and the attach check agree.
    if args.attach_limit is not None and args.attach_limit > 0:
        overrides["node.max_volumes_per_node"] = args.attach_limit
    endpoint = args.endpoint or env.get("CSI_ENDPOINT")
    if endpoint and not endpoint.startswith("unix:///"):
        source = "--endpoint" if args.endpoint else "CSI_ENDPOINT"
        problems.append(
            f"{source}: must be unix:///absolute/path.sock, got {endpoint!r}"
            " (hostpathplugin also takes tcp:// and relative unix paths; csi-mock serves"
            " an absolute unix socket only)"
        )
    elif endpoint:
        overrides["endpoint"] = endpoint
    if args.v is not None and args.log_level is None:
        # hostpathplugin logs each call's request and response from -v=5 on.
        overrides["log_level"] = "debug" if args.v >= 5 else "info"
    return overrides


def _quantity_flag(flag: str, value: str) -> int:
    try:
        return parse_quantity(value)
    except QuantityError as error:
        raise ConfigError(f"{flag}: {error}") from None


def _max_volume_size(value: str) -> int:
    """hostpathplugin's --max-volume-size is a Go int64 of bytes; a Kubernetes quantity
    (which hostpathplugin refuses to start with) is taken as the same number of bytes."""
    try:
        size = go_int(value)
    except argparse.ArgumentTypeError:
        return _quantity_flag("--max-volume-size", value)
    if size < 0:
        raise ConfigError(
            f"--max-volume-size: {value!r} is negative (hostpathplugin would refuse every"
            " volume); give 0 or more bytes"
        )
    return size


def _capacity_sizes(entries: Sequence[str], problems: list[str]) -> dict[str, int]:
    """hostpathplugin's --capacity KIND=QUANTITY, each entry checked: a repeated kind
    replaces the earlier quantity, as hostpathplugin's map does."""
    sizes: dict[str, int] = {}
    for entry in entries:
        kind, sep, quantity = entry.partition("=")
        if not sep or not kind:
            problems.append(f"--capacity {entry!r}: expected KIND=QUANTITY, e.g. fast=100Gi")
            continue
        try:
            sizes[kind] = _quantity_flag(f"--capacity {kind}", quantity)
        except ConfigError as error:
            problems.append(str(error))
    return sizes


def _capacity_pools(
    sizes: dict[str, int], segment: dict[str, str], max_volume_size: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One pool per --capacity kind on this node."""
    kinds = {kind: {"cost": 1.0} for kind in sizes}
    pools = [
        {
            "name": kind,
            "size": size,
            "kinds": [kind],
            "segment": segment,
            "max_volume_size": max_volume_size,
        }
        for kind, size in sizes.items()
    ]
    return kinds, pools


def _name_flags(error: ConfigError) -> ConfigError:
    """Name the flag on each problem line about a key a flag sets: `name: ... [--drivername]`."""
    lines = str(error).splitlines()
    for attribute, key in _KEY_OF_FLAG.items():
        lines = [
            f"{line} [{_flag_name(attribute)}]" if line.startswith(f"  {key}:") else line
            for line in lines
        ]
    return ConfigError("\n".join(lines))


def _without_refused(args: argparse.Namespace, problems: list[str]) -> argparse.Namespace:
    """The flags with each value its type refused taken out (as if not given), and its
    problem added to `problems`, naming the flag."""
    kept = argparse.Namespace(**vars(args))
    for attribute, value in vars(args).items():
        if isinstance(value, Refused):
            problems.append(f"{_flag_name(attribute)}: {value.problem}")
            setattr(kept, attribute, None)
    return kept


def _checked(problems: list[str], parse: Callable[[Any], T], value: Any) -> T | None:
    """`parse(value)`; None when the flag is absent (`value` None), or when it fails,
    its ConfigError then added to `problems`."""
    if value is None:
        return None
    try:
        return parse(value)
    except ConfigError as error:
        problems.append(str(error))
        return None


def _all_at_once(problems: list[str]) -> ConfigError:
    """One problem as it is; several under a line that counts them."""
    if len(problems) == 1:
        return ConfigError(problems[0])
    lines = [f"{len(problems)} problems with the flags or the configuration they make:"]
    lines += [f"  {line}" for problem in problems for line in problem.splitlines()]
    return ConfigError("\n".join(lines))


def resolve_configs(args: argparse.Namespace, env: dict[str, str]) -> list[DriverConfig]:
    """The instances to serve: one from the file (if any) and the flags, or one per
    file when ``--config`` is given more than once (then no other flag may be, and
    $CSI_ENDPOINT is not read: each file says its own endpoint)."""
    files: list[Path] = args.config or []
    if len(files) <= 1:
        return [resolve_config(args, env)]
    given = [
        _flag_name(name)
        for name, value in vars(args).items()
        if name not in ("command", "config") and value not in (None, [])
    ]
    if given:
        raise ConfigError(
            f"{given[0]}: with --config given more than once, every setting comes from"
            " the files; put it in each file instead"
        )
    return [load_config(path) for path in files]


def _config_file(args: argparse.Namespace) -> Path | None:
    files: list[Path] = args.config or []
    return files[0] if files else None


def resolve_config(args: argparse.Namespace, env: dict[str, str]) -> DriverConfig:
    """The file, then the flags, validated; pool flags need the node's segment first.

    Pools follow hostpathplugin: --capacity replaces the pools with one per kind, each
    taking volumes up to --max-volume-size (default 1Ti); without --capacity the flag
    caps the configured pools, and the default pool (no pools configured) is made large
    enough for one volume of that size. Without --config the default pool has
    hostpathplugin's default cap of 1Ti too.

    Every problem of the flags is found before any is reported, and all are reported
    together (one ConfigError), with those of the configuration they make.
    """
    problems: list[str] = []
    args = _without_refused(args, problems)
    overrides = overrides_from_flags(args, env, problems)
    max_size = _checked(problems, _max_volume_size, args.max_volume_size)
    sizes = _capacity_sizes(args.capacity, problems)
    node_max = _checked(problems, _max_volume_size_node, args.max_volume_size_node)
    names = _checked(problems, _mutable_parameter_names, args.accepted_mutable_parameter_names)
    if args.enable_list_snapshots is False:
        problems.append(
            "--enable-list-snapshots=false: csi-mock does not offer snapshots without"
            " ListSnapshots (hostpathplugin would still take snapshots); leave the flag out"
            " for no snapshots, or set it to true"
        )
    try:
        config = load_config(_config_file(args), overrides)
    except ConfigError as error:
        problems.append(str(_name_flags(error)))
    if problems:
        raise _all_at_once(problems)
    config = _modify_flags(args, names or [], config)
    config = _snapshot_flags(args, config)
    config = _expansion_flags(args, node_max, config)
    data = config.model_dump()
    if args.capacity:
        segment = config.node_segment() if config.node.id else {}
        data["kinds"], data["pools"] = _capacity_pools(
            sizes, segment, HOSTPATH_MAX_VOLUME_SIZE if max_size is None else max_size
        )
    elif config.pools:
        if max_size is None:
            return config
        for pool in data["pools"]:
            if pool.get("max_volume_size") is None:
                pool["max_volume_size"] = max_size
    else:
        if max_size is None and args.config:
            return config
        cap = HOSTPATH_MAX_VOLUME_SIZE if max_size is None else max_size
        pool = config.effective_pools()[0].model_dump()
        pool["max_volume_size"] = cap
        pool["size"] = max(pool["size"], cap)
        data["pools"] = [pool]
    try:
        return validate_config(data, source="flags")
    except ConfigError as error:
        raise _name_flags(error) from None


def _modify_flags(args: argparse.Namespace, names: list[str], config: DriverConfig) -> DriverConfig:
    """hostpathplugin's --enable-controller-modify-volume and
    --accepted-mutable-parameter-names: the names (any value) when both are given; any
    name with the flag alone, unless the config file's controller.modify says which;
    false turns modification off. As in hostpathplugin, the names alone do nothing.
    `names` are the flag's, parsed."""
    enabled = args.enable_controller_modify_volume
    if enabled is None:
        return config
    modify: dict[str, Any] | None = None
    if enabled:
        if not names and config.controller.modify is not None:
            return config
        modify = {"mutable_parameters": {name: [] for name in names}} if names else {}
    data = config.model_dump()
    data["controller"]["modify"] = modify
    try:
        return validate_config(data, source="flags")
    except ConfigError as error:
        raise ConfigError(f"{error} [--accepted-mutable-parameter-names]") from None


def _snapshot_flags(args: argparse.Namespace, config: DriverConfig) -> DriverConfig:
    """hostpathplugin's --enable-list-snapshots. hostpathplugin always offers snapshots,
    and the flag (default true) only decides whether LIST_SNAPSHOTS is advertised too;
    csi-mock offers snapshots only when configured, always with ListSnapshots. So true
    turns snapshots on (the config file's controller.snapshots, else full accounting,
    ready at once); false, which csi-mock cannot do, resolve_config refuses."""
    if not args.enable_list_snapshots or config.controller.snapshots is not None:
        return config
    data = config.model_dump()
    data["controller"]["snapshots"] = {}
    return validate_config(data, source="flags")


def _expansion_flags(
    args: argparse.Namespace, node_max: int | None, config: DriverConfig
) -> DriverConfig:
    """hostpathplugin's expansion flags. --enable-volume-expansion sets both sides;
    --disable-controller-expansion turns the controller's off and keeps the node's as it
    was (node-only expansion, as in hostpathplugin, where the two are separate);
    --disable-node-expansion turns the node's off; --node-expand-required is
    ControllerExpandVolume's node_expansion_required; --max-volume-size-node caps
    NodeExpandVolume (`node_max`, parsed). Absent flags keep the config file's values."""
    given = (
        args.enable_volume_expansion,
        args.disable_controller_expansion,
        args.disable_node_expansion,
        args.node_expand_required,
        args.max_volume_size_node,
    )
    if all(value is None for value in given):
        return config
    controller = config.controller.expansion
    node = config.node_expansion
    if args.enable_volume_expansion is not None:
        controller = node = args.enable_volume_expansion
    if args.disable_controller_expansion:
        controller = False
    if args.disable_node_expansion:
        node = False
    data = config.model_dump()
    data["controller"]["expansion"] = controller
    if node != controller or config.node.expansion is not None:
        data["node"]["expansion"] = node
    if args.node_expand_required is not None:
        data["controller"]["node_expansion_required"] = args.node_expand_required
    if node_max is not None:
        data["node"]["max_expansion_size"] = node_max
    return validate_config(data, source="flags")


def _max_volume_size_node(value: str) -> int:
    return _byte_flag("--max-volume-size-node", value)


def _byte_flag(flag: str, value: str) -> int:
    """A Go int64 of bytes (a quantity such as 2Gi is taken as those bytes); negative
    refused naming the flag."""
    try:
        size = go_int(value)
    except argparse.ArgumentTypeError:
        return _quantity_flag(flag, value)
    if size < 0:
        raise ConfigError(f"{flag}: {value!r} is negative; give 0 or more bytes")
    return size


def _mutable_parameter_names(values: Sequence[str]) -> list[str]:
    """Each value split at commas and trimmed, as hostpathplugin's StringArray does."""
    names = []
    for value in values:
        for part in value.split(","):
            name = part.strip()
            if not name:
                raise ConfigError(
                    f"--accepted-mutable-parameter-names: {value!r} has an empty name"
                    " (hostpathplugin would accept only the empty name, refusing every"
                    " other); give names separated by commas"
                )
            names.append(name)
    return names
