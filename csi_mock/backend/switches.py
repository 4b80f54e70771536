"""The driver's behaviour the admin API may change while it serves: expansion and stats.

Start-up values come from the configuration; `/v1/switches` changes them afterwards.
Every handler reads them when it runs, so a change applies from the next call on, and
capabilities advertised afterwards (ControllerGetCapabilities, NodeGetCapabilities,
GetPluginCapabilities) say the same as the RPCs do.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from csi_mock.config import DriverConfig


@dataclass
class Switches:
    controller_expansion: bool
    """ControllerExpandVolume and the controller's EXPAND_VOLUME capability."""
    node_expansion: bool
    """NodeExpandVolume and the node's EXPAND_VOLUME capability."""
    node_expansion_required: bool
    """ControllerExpandVolume's node_expansion_required."""
    online_expansion: bool
    """The plugin's VolumeExpansion capability: ONLINE, else OFFLINE."""
    volume_stats: bool
    """NodeGetVolumeStats and the node's GET_VOLUME_STATS (and VOLUME_CONDITION)."""

    @classmethod
    def from_config(cls, config: DriverConfig) -> Switches:
        return cls(
            controller_expansion=config.controller.expansion,
            node_expansion=config.node_expansion,
            node_expansion_required=config.controller.node_expansion_required,
            online_expansion=config.online_expansion,
            volume_stats=config.node.volume_stats,
        )

    def restore(self, config: DriverConfig) -> None:
        """Back to the start-up values, in place (the services hold this object)."""
        for name, value in asdict(Switches.from_config(config)).items():
            setattr(self, name, value)

    @property
    def expansion(self) -> bool:
        """Whether the plugin can expand volumes at all (the VolumeExpansion capability)."""
        return self.controller_expansion or self.node_expansion

    def to_json(self) -> dict[str, bool]:
        return asdict(self)
