"""Driver configuration: one typed model, validated once at start-up.

A YAML file and command-line flags (including csi-driver-host-path's flag names) are
merged into one plain mapping and validated together, so every error names the key.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from csi_mock.fault_rules import Duration, FaultRuleSpec
from csi_mock.model.kind import KIND_PARAMETER
from csi_mock.model.mutable_parameters import MutableParameterRules
from csi_mock.model.pool import Allocation
from csi_mock.model.quantity import QuantityError, parse_quantity
from csi_mock.model.snapshot import SnapshotAccounting

DEFAULT_DRIVER_NAME = "csi-mock.example"
DEFAULT_NODE_TOPOLOGY_KEY = "topology.csi-mock.example/node"
EPHEMERAL_CONTEXT_KEY = "csi.storage.k8s.io/ephemeral"


class ConfigError(ValueError):
    """Invalid configuration; the message names every bad key and value."""


def _quantity(value: object) -> int:
    if isinstance(value, str | int) and not isinstance(value, bool):
        try:
            return parse_quantity(value)
        except QuantityError as error:
            raise ValueError(str(error)) from None
    raise ValueError(f"{value!r} is not a quantity")


Quantity = Annotated[int, BeforeValidator(_quantity)]

_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def _validate_segment(segment: Mapping[str, str]) -> dict[str, str]:
    for key, value in segment.items():
        prefix, _, name = key.rpartition("/")
        if (prefix and not _DNS_SUBDOMAIN.match(prefix)) or not _LABEL_NAME.match(name):
            raise ValueError(f"topology key {key!r} is not a valid label key")
        if value and not _LABEL_NAME.match(value):
            raise ValueError(f"topology value {value!r} of {key!r} is not a valid label value")
    return dict(segment)


Segment = Annotated[dict[str, str], BeforeValidator(lambda v: v if v is not None else {})]


class Mode(enum.Enum):
    CONTROLLER = "controller"
    NODE = "node"
    ALL = "all"

    @property
    def controller(self) -> bool:
        return self in (Mode.CONTROLLER, Mode.ALL)

    @property
    def node(self) -> bool:
        return self in (Mode.NODE, Mode.ALL)


class MountMode(enum.Enum):
    AUTO = "auto"
    BIND = "bind"
    """Real bind mounts (needs root)."""
    DIRECTORY = "directory"
    """No mounts: target directories are created and recorded (unprivileged runs)."""


class BlockDeviceMode(enum.Enum):
    AUTO = "auto"
    """Loop devices when mounts are real and /dev/loop-control is usable, else files."""
    LOOP = "loop"
    """Publish a raw block volume as a loop device node over its backing file (what
    container runtimes and the kubelet's block teardown need)."""
    FILE = "file"
    """Publish the backing file itself (enough for csi-sanity and unprivileged runs)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KindConfig(_Model):
    cost: float = Field(1.0, gt=0, le=64)


class PoolConfig(_Model):
    name: str = Field(pattern=_SAFE_NAME.pattern)
    size: Quantity
    segment: Segment = Field(default_factory=dict)
    max_volume_size: Quantity | None = None
    min_volume_size: Quantity = 0
    kinds: list[str] | None = None
    allocation: Allocation = Allocation.POOLED

    @model_validator(mode="after")
    def _check(self) -> PoolConfig:
        _validate_segment(self.segment)
        if self.max_volume_size is not None and self.max_volume_size < self.min_volume_size:
            raise ValueError("max_volume_size is smaller than min_volume_size")
        return self


DEFAULT_PLUGINS_REGISTRY = Path("/var/lib/kubelet/plugins_registry")
UNIX_SOCKET_PATH_MAX = 107
"""sun_path holds 108 bytes including the terminating NUL."""


def _absolute_path(path: Path) -> Path:
    if str(path).startswith("unix:"):
        raise ValueError("must be a plain absolute path, without unix://")
    if not path.is_absolute():
        raise ValueError("must be an absolute path")
    return path


AbsolutePath = Annotated[Path, AfterValidator(_absolute_path)]


def _check_socket_length(path: Path, what: str, fix: str) -> None:
    size = len(os.fsencode(path))
    if size > UNIX_SOCKET_PATH_MAX:
        raise ValueError(
            f"{what} {str(path)!r} is {size} bytes, longer than {UNIX_SOCKET_PATH_MAX} (the"
            f" limit of a unix socket path); {fix}"
        )


class RegistrationConfig(_Model):
    """Registration with the kubelet's plugin watcher, as node-driver-registrar does it."""

    plugins_registry: AbsolutePath = DEFAULT_PLUGINS_REGISTRY
    """The directory the kubelet watches; the socket <name>-reg.sock is created in it."""
    kubelet_endpoint: AbsolutePath | None = None
    """The CSI socket path as the kubelet sees it (node-driver-registrar's
    --kubelet-registration-path); default: this process's own socket path."""


class NodeConfig(_Model):
    id: str | None = Field(None, min_length=1, max_length=253)
    max_volumes_per_node: int = Field(0, ge=0)
    segment: Segment | None = None
    """Topology labels NodeGetInfo reports; default: {node_topology_key: id}."""
    mount: MountMode = MountMode.AUTO
    block_device: BlockDeviceMode = BlockDeviceMode.AUTO
    stage_unstage: bool = True
    materialize_missing_volumes: bool = False
    """Create a volume's backing directory on first use when the controller's backend
    directory is not shared with this node (e.g. separate kind nodes)."""
    registration: RegistrationConfig | None = None
    """Register with the kubelet (replacing node-driver-registrar); None: do not."""
    allowed_roots: list[str] | None = None
    """Directories staging and target paths must be within (e.g. the kubelet's root
    directory); None: anywhere but the driver's own directories."""
    expansion: bool | None = None
    """NodeExpandVolume and the node's EXPAND_VOLUME capability (hostpathplugin's
    --disable-node-expansion turns it off); None: as controller.expansion."""
    max_expansion_size: Quantity | None = Field(None, ge=0)
    """NodeExpandVolume above this size is OUT_OF_RANGE (hostpathplugin's
    --max-volume-size-node); None: no node-side cap."""
    volume_stats: bool = True
    """NodeGetVolumeStats and GET_VOLUME_STATS; false: UNIMPLEMENTED, not advertised."""
    volume_condition: bool = True
    """VOLUME_CONDITION: NodeGetVolumeStats reports volume_condition (advertised only
    while volume stats are on)."""
    volume_mount_group: bool = False
    """VOLUME_MOUNT_GROUP: NodeStage/NodePublish take volume_mount_group as the group of
    the volume's data (a numeric group ID)."""
    volume_health: bool = False
    """GET_VOLUME_HEALTH (CSI v1.13): NodeGetVolumeHealth reports what the admin API set
    for a volume, else what the node sees (backing data or target path gone)."""
    storage_health: bool = False
    """GET_STORAGE_HEALTH (CSI v1.13): NodeGetStorageHealth reports the backend health
    the admin API set (none: healthy)."""

    @field_validator("allowed_roots")
    @classmethod
    def _absolute_roots(cls, roots: list[str] | None) -> list[str] | None:
        for root in roots or []:
            if not os.path.isabs(root):
                raise ValueError(f"{root!r} is not an absolute path")
        return roots


def _parameter_value(value: object) -> object:
    """YAML reads `iops: [1000]` and `[true]` as a number and a bool; parameter values
    are strings, as Kubernetes writes them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


ParameterValue = Annotated[str, BeforeValidator(_parameter_value)]


class ModifyConfig(_Model):
    """ControllerModifyVolume and CreateVolume's mutable_parameters (MODIFY_VOLUME)."""

    mutable_parameters: dict[str, list[ParameterValue]] | None = None
    """Parameter name -> allowed values; an empty list allows any value. None: any name
    with any value (hostpathplugin's --enable-controller-modify-volume alone)."""

    @field_validator("mutable_parameters")
    @classmethod
    def _names(cls, parameters: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
        for name in parameters or {}:
            if not name:
                raise ValueError("a parameter name must not be empty")
            if name == KIND_PARAMETER:
                raise ValueError(
                    f"{name!r} selects the volume's kind, which cannot change after creation"
                )
        return parameters

    def rules(self) -> MutableParameterRules:
        if self.mutable_parameters is None:
            return MutableParameterRules(None)
        return MutableParameterRules(
            {name: tuple(values) for name, values in self.mutable_parameters.items()}
        )


class SnapshotConfig(_Model):
    """CreateSnapshot, DeleteSnapshot, ListSnapshots, GetSnapshot and restores
    (CREATE_DELETE_SNAPSHOT, LIST_SNAPSHOTS, GET_SNAPSHOT)."""

    accounting: SnapshotAccounting = SnapshotAccounting.FULL
    """How much of the source volume's pool a snapshot takes."""
    ready_after: Duration = Field(0.0, ge=0)
    """Seconds (or a Go duration) after its creation until a snapshot is ready_to_use."""


class ControllerConfig(_Model):
    known_nodes: list[str] | None = None
    """Node IDs (globs) ControllerPublishVolume accepts; default: any, or only this
    process's own node ID in combined mode."""
    attach_limit: int = Field(0, ge=0)
    default_volume_size: Quantity = 1 << 30
    report_maximum_volume_size: bool = True
    expansion: bool = True
    """ControllerExpandVolume and the controller's EXPAND_VOLUME capability (false alone
    also turns node expansion off, unless node.expansion says otherwise)."""
    node_expansion_required: bool = True
    """ControllerExpandVolume's node_expansion_required (hostpathplugin's
    --node-expand-required)."""
    volume_condition: bool = False
    """VOLUME_CONDITION: ListVolumes and ControllerGetVolume report volume_condition."""
    volume_health: bool = False
    """GET_VOLUME_HEALTH and LIST_VOLUME_HEALTH (CSI v1.13): ControllerGetVolumeHealth and
    ControllerListVolumeHealth report the volume health the admin API set."""
    modify: ModifyConfig | None = None
    """None: no MODIFY_VOLUME; ControllerModifyVolume is UNIMPLEMENTED."""
    snapshots: SnapshotConfig | None = None
    """None: no snapshots; the snapshot RPCs are UNIMPLEMENTED and a snapshot content
    source is refused."""
    clones: bool = False
    """CLONE_VOLUME: CreateVolume with a volume content source."""


class JournalRequests(enum.Enum):
    """What the journal keeps of each request."""

    KEYS = "keys"
    """The identifying fields (IDs, names, paths, sizes, parameters, topology)."""
    WHOLE = "whole"
    """Also the whole request and reply, every secret hashed."""


class AdminConfig(_Model):
    socket: Path | None = None
    """HTTP/JSON admin API on a unix socket; default <state_dir>/admin.sock. No token."""
    tcp: str | None = Field(None, pattern=r"^[^\s:]+:[0-9]{1,5}$")
    """Also listen on host:port (e.g. 0.0.0.0:9809 for the API server's pod proxy)."""
    token: str | None = Field(None, min_length=16)
    token_file: Path | None = None
    """Bearer token required on TCP (read once at start-up)."""
    journal_size: int = Field(10_000, ge=1, le=1_000_000)
    """Call records the journal keeps."""
    journal_requests: JournalRequests = JournalRequests.KEYS
    """keys (default): each record keeps the request's key fields; whole: also the whole
    request and reply, secrets hashed."""
    journal_whole_size: int = Field(1_000, ge=1, le=1_000_000)
    """With journal_requests: whole, how many of the latest records keep their whole
    messages (older ones keep the key fields): the cap on the journal's memory."""
    neighbours: list[Annotated[str, Field(pattern=_SAFE_NAME.pattern)]] = Field(
        default_factory=list
    )
    """Programs of this pod that the admin API may pause and resume, by the base name of
    their argv[0] (e.g. csi-attacher): the pod's other containers, visible when it shares
    one process namespace (csi_mock.host.neighbours)."""

    @model_validator(mode="after")
    def _check(self) -> AdminConfig:
        if self.tcp and not (self.token or self.token_file):
            raise ValueError("admin.tcp needs admin.token or admin.token_file (bearer auth)")
        return self


class DriverConfig(_Model):
    name: str = Field(DEFAULT_DRIVER_NAME, pattern=_DNS_SUBDOMAIN.pattern, max_length=63)
    mode: Mode = Mode.ALL
    endpoint: str = "unix:///run/csi-mock/csi.sock"
    state_dir: Path = Path("/var/lib/csi-mock")
    backend_dir: Path | None = None
    """Where volume data lives; default <state_dir>/volumes. Point the controller and
    node processes at the same directory to model network-attached storage."""
    attach_required: bool = False
    topology: bool = True
    online_expansion: bool = True
    """The plugin's VolumeExpansion capability: ONLINE, else OFFLINE (a published volume
    is then not expanded: FAILED_PRECONDITION)."""
    node_topology_key: str = DEFAULT_NODE_TOPOLOGY_KEY
    kinds: dict[str, KindConfig] = Field(default_factory=lambda: {"default": KindConfig()})
    default_kind: str | None = None
    pools: list[PoolConfig] = Field(default_factory=list)
    node: NodeConfig = Field(default_factory=NodeConfig)
    controller: ControllerConfig = Field(default_factory=ControllerConfig)
    admin: AdminConfig = Field(default_factory=AdminConfig)
    faults: list[FaultRuleSpec] = Field(default_factory=list)
    """Fault rules active from start-up (more can be added through the admin API)."""
    log_level: str = Field("info", pattern="^(debug|info|warning|error)$")

    @field_validator("endpoint")
    @classmethod
    def _unix_endpoint(cls, endpoint: str) -> str:
        if not endpoint.startswith("unix://") or not endpoint[7:].startswith("/"):
            raise ValueError("must be unix:///absolute/path.sock")
        _check_socket_length(Path(endpoint[7:]), "the socket path", "give a shorter path")
        return endpoint

    @model_validator(mode="after")
    def _check(self) -> DriverConfig:
        if self.mode.node and not self.node.id:
            raise ValueError("node.id is required when the node service runs (mode node or all)")
        if not self.kinds:
            raise ValueError("kinds must define at least one kind")
        if self.default_kind is not None and self.default_kind not in self.kinds:
            raise ValueError(f"default_kind {self.default_kind!r} is not one of the kinds")
        names = [pool.name for pool in self.pools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"pool names must be unique: {', '.join(duplicates)}")
        for pool in self.pools:
            for kind in pool.kinds or ():
                if kind not in self.kinds:
                    raise ValueError(f"pool {pool.name!r} serves unknown kind {kind!r}")
        _validate_segment({self.node_topology_key: "x"})
        if self.node.segment:
            _validate_segment(self.node.segment)
        if self.admin.socket is not None:
            _check_socket_length(self.admin.socket, "admin.socket:", "give a shorter path")
        else:
            _check_socket_length(
                self.admin_socket_path,
                "state_dir: the admin socket",
                "give a shorter state_dir, or set admin.socket to a shorter path",
            )
        if self.node.registration is not None:
            if not self.mode.node:
                raise ValueError(
                    "node.registration needs the node service (mode node or all),"
                    f" not mode {self.mode.value}"
                )
            socket = self.registration_socket_path
            if socket is not None and len(os.fsencode(socket)) > UNIX_SOCKET_PATH_MAX:
                raise ValueError(
                    f"node.registration.plugins_registry: the socket path {str(socket)!r} is"
                    f" longer than {UNIX_SOCKET_PATH_MAX} bytes, the limit of a unix socket"
                )
        return self

    # -- derived values -------------------------------------------------------------

    @property
    def socket_path(self) -> Path:
        return Path(self.endpoint[len("unix://") :])

    @property
    def registration_socket_path(self) -> Path | None:
        """<plugins_registry>/<name>-reg.sock, or None when registration is off."""
        registration = self.node.registration
        if registration is None:
            return None
        return registration.plugins_registry / f"{self.name}-reg.sock"

    @property
    def kubelet_endpoint(self) -> Path:
        """The CSI socket path the kubelet is told to dial (PluginInfo.endpoint)."""
        registration = self.node.registration
        if registration is not None and registration.kubelet_endpoint is not None:
            return registration.kubelet_endpoint
        return self.socket_path

    @property
    def node_expansion(self) -> bool:
        """Whether NodeExpandVolume works: node.expansion, else controller.expansion."""
        if self.node.expansion is not None:
            return self.node.expansion
        return self.controller.expansion

    @property
    def admin_socket_path(self) -> Path:
        return self.admin.socket or self.state_dir / "admin.sock"

    @property
    def volumes_dir(self) -> Path:
        return self.backend_dir or self.state_dir / "volumes"

    @property
    def snapshots_dir(self) -> Path:
        """Where snapshot data lives: apart from the volumes, whose directory start-up
        cleans of entries without a volume row."""
        return self.state_dir / "snapshots"

    @property
    def effective_default_kind(self) -> str:
        return self.default_kind or next(iter(self.kinds))

    def node_segment(self) -> dict[str, str]:
        """The topology NodeGetInfo reports (empty when topology is off)."""
        if not self.topology:
            return {}
        if self.node.segment is not None:
            return dict(self.node.segment)
        return {self.node_topology_key: self.node.id or ""}

    def effective_pools(self) -> list[PoolConfig]:
        """Configured pools, or one default pool for this node when none are given."""
        if self.pools:
            return list(self.pools)
        segment = self.node_segment() if self.node.id else {}
        return [PoolConfig(name="default", size=1 << 40, segment=segment)]


def load_config(
    path: Path | None = None, overrides: Mapping[str, Any] | None = None
) -> DriverConfig:
    """Read the YAML file (if any), apply dotted-key overrides and validate once."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text())
        except OSError as error:
            raise ConfigError(f"cannot read config file {path}: {error.strerror}") from None
        except yaml.YAMLError as error:
            raise ConfigError(f"{path}: invalid YAML: {error}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping")
        data = loaded or {}
    for dotted, value in (overrides or {}).items():
        _set_dotted(data, dotted, value)
    return validate_config(data, source=str(path) if path else "flags")


def validate_config(data: Mapping[str, Any], source: str = "config") -> DriverConfig:
    try:
        return DriverConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(_describe(error, source)) from None


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    for key in keys[:-1]:
        child = data.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{'.'.join(keys)}: {key} is not a mapping")
        data = child
    data[keys[-1]] = value


def _describe(error: ValidationError, source: str) -> str:
    lines = [f"invalid configuration ({source}):"]
    for problem in error.errors():
        location = ".".join(str(part) for part in problem["loc"])
        message = problem["msg"].removeprefix("Value error, ")
        if problem["type"] == "extra_forbidden":
            message = "unknown key"
        given = problem.get("input")
        shown = "" if isinstance(given, dict | list) or given is None else f" (got {given!r})"
        lines.append(f"  {location}: {message}{shown}" if location else f"  {message}")
    return "\n".join(lines)
