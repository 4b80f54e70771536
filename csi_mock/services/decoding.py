"""Request bytes that do not decode: INVALID_ARGUMENT naming the field, not UNKNOWN.

Python protobuf refuses a `string` field that is not valid UTF-8 while parsing, so gRPC's
deserializer fails before any handler runs and the caller sees UNKNOWN. The interceptor
deserializes with `lenient`, which turns such bytes into an `UndecodableRequest`; the
call then fails through the status table like any other bad input. Which field was at
fault is found by walking the wire format against the message's descriptor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError

from csi_mock.model.errors import InvalidArgument

Deserializer = Callable[[bytes], Any]

_VARINT, _FIXED64, _LENGTH_DELIMITED, _FIXED32 = 0, 1, 2, 5


@dataclass(frozen=True)
class UndecodableRequest:
    """What `lenient` returns for bytes that are not a valid request."""

    error: InvalidArgument


def lenient(deserialize: Deserializer | None) -> Deserializer | None:
    """`deserialize`, answering an `UndecodableRequest` instead of raising DecodeError."""
    if deserialize is None:
        return None
    descriptor: Descriptor | None = getattr(
        getattr(deserialize, "__self__", None), "DESCRIPTOR", None
    )

    def decode(data: bytes) -> Any:
        try:
            return deserialize(data)
        except DecodeError:
            return UndecodableRequest(undecodable(descriptor, data))

    return decode


def undecodable(descriptor: Descriptor | None, data: bytes) -> InvalidArgument:
    """Why `data` is not a message of `descriptor`, naming the field when it can."""
    if descriptor is None:
        return InvalidArgument("the request is not a valid protobuf message")
    try:
        field = field_not_utf8(descriptor, data)
    except (IndexError, ValueError):
        field = None
    if field is not None:
        return InvalidArgument(f"{field} is not valid UTF-8")
    return InvalidArgument(f"the request is not a valid {descriptor.full_name} message")


def field_not_utf8(descriptor: Descriptor, data: bytes, prefix: str = "") -> str | None:
    """The path (`volume_capabilities[0].mount.fs_type`, `parameters['kind']`) of the
    first string field in `data` that is not UTF-8; None when every one is.

    Raises IndexError or ValueError on bytes that are not wire format at all."""
    position = 0
    counts: dict[int, int] = {}
    while position < len(data):
        key, position = _varint(data, position)
        number, wire_type = key >> 3, key & 7
        if wire_type == _VARINT:
            _, position = _varint(data, position)
            continue
        if wire_type in (_FIXED64, _FIXED32):
            position += 8 if wire_type == _FIXED64 else 4
            continue
        if wire_type != _LENGTH_DELIMITED:
            raise ValueError(f"wire type {wire_type} is not used by CSI")
        length, position = _varint(data, position)
        chunk = data[position : position + length]
        if len(chunk) != length:
            raise IndexError("truncated field")
        position += length
        field = descriptor.fields_by_number.get(number)
        if field is None:
            continue
        index = counts.get(number, 0)
        counts[number] = index + 1
        found = _check(field, chunk, prefix, index)
        if found is not None:
            return found
    return None


def _check(field: FieldDescriptor, chunk: bytes, prefix: str, index: int) -> str | None:
    name = prefix + field.name
    if field.type == FieldDescriptor.TYPE_STRING:
        return None if _is_utf8(chunk) else _indexed(field, name, index)
    entry = field.message_type
    if field.type != FieldDescriptor.TYPE_MESSAGE or entry is None:
        return None
    if entry.GetOptions().map_entry:
        return _check_map_entry(entry, chunk, name)
    return field_not_utf8(entry, chunk, _indexed(field, name, index) + ".")


def _check_map_entry(entry: Descriptor, chunk: bytes, name: str) -> str | None:
    """A map entry (CSI's are map<string, string>): the key when it is bad, else the
    value under its key."""
    key = _raw_value(chunk, entry.fields_by_name["key"].number) or b""
    if not _is_utf8(key):
        return f"{name} (a key)"
    value = _raw_value(chunk, entry.fields_by_name["value"].number) or b""
    return None if _is_utf8(value) else f"{name}[{key.decode()!r}]"


def _raw_value(data: bytes, wanted: int) -> bytes | None:
    """The last length-delimited value of field `wanted` in `data`, as protobuf keeps
    the last of a repeated scalar."""
    position, found = 0, None
    while position < len(data):
        key, position = _varint(data, position)
        number, wire_type = key >> 3, key & 7
        if wire_type == _VARINT:
            _, position = _varint(data, position)
        elif wire_type in (_FIXED64, _FIXED32):
            position += 8 if wire_type == _FIXED64 else 4
        elif wire_type == _LENGTH_DELIMITED:
            length, position = _varint(data, position)
            if number == wanted:
                found = data[position : position + length]
            position += length
        else:
            raise ValueError(f"wire type {wire_type} is not used by CSI")
    return found


def _indexed(field: FieldDescriptor, name: str, index: int) -> str:
    return f"{name}[{index}]" if field.is_repeated else name


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")
