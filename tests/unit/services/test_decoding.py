"""Finding the field of a request whose bytes are not UTF-8."""

from csi_mock.proto import csi_pb2 as pb
from csi_mock.services.decoding import UndecodableRequest, field_not_utf8, lenient, undecodable

MARK = "\u00e9\u00e9"
NOT_UTF8 = b"\xff\xfe\xc3\x28"


def wire(message: object) -> bytes:
    return message.SerializeToString().replace(MARK.encode(), NOT_UTF8)  # type: ignore[attr-defined]


def test_a_valid_request_has_no_bad_field() -> None:
    request = pb.CreateVolumeRequest(name="pvc", parameters={"kind": "striped"})
    assert field_not_utf8(request.DESCRIPTOR, request.SerializeToString()) is None


def test_a_repeated_message_field_is_named_with_its_index() -> None:
    request = pb.CreateVolumeRequest(name="pvc")
    request.volume_capabilities.add().mount.fs_type = "ext4"
    request.volume_capabilities.add().mount.mount_flags.extend(["ro", MARK])
    found = field_not_utf8(request.DESCRIPTOR, wire(request))
    assert found == "volume_capabilities[1].mount.mount_flags[1]"


def test_a_map_key_that_is_not_utf8_is_named_as_a_key() -> None:
    request = pb.CreateVolumeRequest(name="pvc", parameters={MARK: "x"})
    assert field_not_utf8(request.DESCRIPTOR, wire(request)) == "parameters (a key)"


def test_bytes_that_are_no_message_name_the_message_type() -> None:
    error = undecodable(pb.CreateVolumeRequest.DESCRIPTOR, b"\x0a\xff")
    assert str(error) == "the request is not a valid csi.v1.CreateVolumeRequest message"


def test_lenient_decodes_a_valid_request_and_wraps_a_bad_one() -> None:
    decode = lenient(pb.NodeUnpublishVolumeRequest.FromString)
    assert decode is not None
    good = pb.NodeUnpublishVolumeRequest(volume_id="v", target_path="/t")
    assert decode(good.SerializeToString()) == good
    bad = decode(wire(pb.NodeUnpublishVolumeRequest(volume_id="v", target_path=MARK)))
    assert isinstance(bad, UndecodableRequest)
    assert str(bad.error) == "target_path is not valid UTF-8"
