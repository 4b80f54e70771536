"""What fault rules do to protobuf messages: read a request as a tree, rewrite reply
fields by path, build a rescue's reply.

Values come validated (`csi_mock.fault_rules` checks every path and value against the
proto's schema when a rule is added), in proto3 JSON's shape: an object for a message, a
list for a repeated field, an enum by name, a wrapper (google.protobuf.Int64Value...) as
its scalar. So nothing here can fail on a rule's account at call time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.message import Message

from csi_mock.model.field_path import FieldPath, Step
from csi_mock.proto import csi_pb2

_CSI = csi_pb2.DESCRIPTOR  # the CSI messages are in the default pool once this is imported

FieldDescriptor = Any
"""google.protobuf's FieldDescriptor, which its stubs split into two classes."""


def request_fields(request: Message) -> dict[str, Any]:
    """The whole request as a tree for `where` conditions: the proto's field names,
    enums by name, int64 as numbers, and every field at its default value present (so
    that `readonly=false` holds for a request that leaves readonly unset)."""
    return json_format.MessageToDict(
        request,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
        unquote_int64_if_possible=True,
    )


def response_class(full_method: str) -> type[Message] | None:
    """The reply message class of '/csi.v1.Controller/CreateVolume', None when the
    default pool does not know the method."""
    service, _, method = full_method.strip("/").rpartition("/")
    try:
        found = descriptor_pool.Default().FindMethodByName(f"{service}.{method}")
    except KeyError:
        return None
    return message_factory.GetMessageClass(found.output_type)


def reply_of(cls: type[Message], fields: dict[str, Any]) -> Message:
    """A reply of type `cls` holding `fields` (a rescue's reply)."""
    reply = cls()
    _fill(reply, fields)
    return reply


def apply_overrides(response: Message, rewrites: Iterable[tuple[FieldPath, Any]]) -> None:
    """Set each path of the reply to its value, in order. A field name after a list
    applies to each element; an index past the list's end, or a path through an empty
    list, sets nothing; a message on the way is created when unset."""
    for path, value in rewrites:
        _rewrite(response, path.steps, value)


def _rewrite(message: Message, steps: tuple[Step, ...], value: Any) -> None:
    name, rest = steps[0], steps[1:]
    assert isinstance(name, str)  # validated: a message's step is a field name
    field = message.DESCRIPTOR.fields_by_name[name]
    if not rest:
        _assign(message, field, value)
    elif _is_map(field):
        _set_entry(getattr(message, name), field, rest[0], value)  # a key ends the path
    elif field.is_repeated:
        container = getattr(message, name)
        index = rest[0]
        if not isinstance(index, int):
            for element in container:
                _rewrite(element, rest, value)
        elif index < len(container) and len(rest) == 1:
            _set_element(container, field, index, value)
        elif index < len(container):
            _rewrite(container[index], rest[1:], value)
    else:
        child = getattr(message, name)
        child.SetInParent()  # sent even when the value set is its default, whatever the runtime
        _rewrite(child, rest, value)


def _assign(message: Message, field: FieldDescriptor, value: Any) -> None:
    """Replace one field of `message` (a whole list or map included) with `value`."""
    if _is_map(field):
        container = getattr(message, field.name)
        container.clear()
        for key, item in value.items():
            _set_entry(container, field, key, item)
    elif field.is_repeated:
        container = getattr(message, field.name)
        del container[:]
        for item in value:
            if field.message_type is not None:
                _set_message(container.add(), item)
            else:
                container.append(_scalar(field, item))
    elif field.message_type is not None:
        _set_message(getattr(message, field.name), value)
    else:
        setattr(message, field.name, _scalar(field, value))


def _set_message(message: Message, value: Any) -> None:
    message.Clear()
    message.SetInParent()
    if _is_wrapper(message.DESCRIPTOR):
        message.value = value  # type: ignore[attr-defined]
    else:
        _fill(message, value)


def _fill(message: Message, fields: dict[str, Any]) -> None:
    for name, value in fields.items():
        _assign(message, message.DESCRIPTOR.fields_by_name[name], value)


def _set_entry(container: Any, field: FieldDescriptor, key: Step, value: Any) -> None:
    value_field = field.message_type.fields_by_name["value"]
    if value_field.message_type is not None:
        _set_message(container[key], value)
    else:
        container[key] = _scalar(value_field, value)


def _set_element(container: Any, field: FieldDescriptor, index: int, value: Any) -> None:
    if field.message_type is not None:
        _set_message(container[index], value)
    else:
        container[index] = _scalar(field, value)


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    if field.enum_type is not None:
        return field.enum_type.values_by_name[value].number
    return value


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _is_wrapper(descriptor: Any) -> bool:
    return descriptor.full_name.startswith("google.protobuf.") and list(
        descriptor.fields_by_name
    ) == ["value"]
