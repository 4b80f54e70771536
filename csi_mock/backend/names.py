"""The names a CO chooses (CreateVolume's and CreateSnapshot's `name`): what CSI allows."""

from __future__ import annotations

from csi_mock.model.errors import InvalidArgument

NAME_MAX_BYTES = 128  # CSI: string fields SHALL NOT exceed 128 bytes


def check_name(name: str) -> None:
    """CSI names: at most 128 bytes, none of the control characters the spec bans."""
    if len(name.encode()) > NAME_MAX_BYTES:
        raise InvalidArgument(f"name is longer than {NAME_MAX_BYTES} bytes")
    for char in name:
        if _banned(ord(char)):
            raise InvalidArgument(f"name contains the banned character U+{ord(char):04X}")


def _banned(point: int) -> bool:
    # Allowed: tab (09), newline (0A) and carriage return (0D); banned: the rest of C0,
    # DEL and C1 (U+0000-0008, 000B, 000C, 000E-001F, 007F-009F).
    return (point < 0x20 and point not in (0x09, 0x0A, 0x0D)) or 0x7F <= point <= 0x9F
