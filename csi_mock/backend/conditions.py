"""Volume conditions a test sets (admin API), reported by ListVolumes, ControllerGetVolume
and NodeGetVolumeStats (the VOLUME_CONDITION capabilities).

Kept in memory by each process: a controller and a node in separate processes each
report what was set on them.
"""

from __future__ import annotations

from dataclasses import dataclass

HEALTHY_MESSAGE = "healthy"


@dataclass(frozen=True)
class VolumeCondition:
    abnormal: bool
    message: str

    def to_json(self) -> dict[str, object]:
        return {"abnormal": self.abnormal, "message": self.message}


HEALTHY = VolumeCondition(False, HEALTHY_MESSAGE)


class VolumeConditions:
    """The condition set for each volume; a volume without one is healthy."""

    def __init__(self) -> None:
        self._conditions: dict[str, VolumeCondition] = {}

    def set(self, volume_id: str, condition: VolumeCondition) -> None:
        self._conditions[volume_id] = condition

    def clear(self, volume_id: str) -> bool:
        """Forget the volume's condition; False when none was set."""
        return self._conditions.pop(volume_id, None) is not None

    def of(self, volume_id: str) -> VolumeCondition | None:
        """The condition set for the volume, None when none was set."""
        return self._conditions.get(volume_id)

    def all(self) -> dict[str, VolumeCondition]:
        return dict(self._conditions)

    def clear_all(self) -> None:
        self._conditions.clear()
