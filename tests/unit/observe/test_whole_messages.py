"""Whole messages with their secrets hashed (csi_mock/observe/whole_messages.py)."""

from __future__ import annotations

import json

from csi_mock.observe.whole_messages import SecretHasher, WholeMessages
from csi_mock.proto import csi_pb2 as pb

SALT = b"0123456789abcdef"
TOKEN_KEY = "csi.storage.k8s.io/serviceAccount.tokens"


def whole() -> WholeMessages:
    return WholeMessages(SecretHasher(SALT))


def test_secrets_keep_their_keys_and_get_a_salted_hash_of_each_value() -> None:
    request = pb.NodeStageVolumeRequest(volume_id="vol-1", secrets={"password": "hunter2"})

    tree = whole().to_dict(request)

    assert tree["secrets"] == {"password": SecretHasher(SALT).digest("hunter2")}
    assert tree["secrets"]["password"].startswith("sha256:")
    assert "hunter2" not in json.dumps(tree)


def test_the_hash_depends_on_the_salt() -> None:
    assert SecretHasher(SALT).digest("hunter2") != SecretHasher(b"another salt").digest("hunter2")
    assert SecretHasher().digest("hunter2") != SecretHasher().digest("hunter2")


def test_field_names_stay_as_in_the_proto_and_other_fields_are_kept_whole() -> None:
    request = pb.NodePublishVolumeRequest(
        volume_id="vol-1",
        target_path="/t",
        volume_context={"csi.storage.k8s.io/pod.name": "web-0"},
    )
    request.volume_capability.mount.mount_flags.extend(["ro", "context=system_u:x"])
    request.volume_capability.mount.volume_mount_group = "2000"

    tree = whole().to_dict(request)

    assert tree["volume_context"] == {"csi.storage.k8s.io/pod.name": "web-0"}
    assert tree["volume_capability"]["mount"] == {
        "mount_flags": ["ro", "context=system_u:x"],
        "volume_mount_group": "2000",
    }


def test_a_service_account_token_in_volume_context_is_a_secret_too() -> None:
    request = pb.NodePublishVolumeRequest(
        volume_id="vol-1", volume_context={TOKEN_KEY: '{"aud": {"token": "eyJtoken"}}'}
    )

    tree = whole().to_dict(request)

    assert tree["volume_context"][TOKEN_KEY] == SecretHasher(SALT).digest(
        '{"aud": {"token": "eyJtoken"}}'
    )
    assert "eyJtoken" not in json.dumps(tree)


def test_every_secrets_field_of_a_request_is_hashed() -> None:
    request = pb.CreateVolumeRequest(name="pvc-1", secrets={"a": "clear-a"})
    other = pb.ControllerPublishVolumeRequest(volume_id="v", secrets={"b": "clear-b"})

    text = json.dumps([whole().to_dict(request), whole().to_dict(other)])

    assert "clear-a" not in text and "clear-b" not in text


def test_secrets_are_hashed_at_any_depth_and_in_lists() -> None:
    tree = whole().redacted(
        {
            "outer": {"inner": {"node_secrets": {"k": "deep-clear"}}},
            "items": [{"secrets": {"k": "listed-clear"}}],
            "parameters": {"secrets": "not a secrets map"},
        }
    )

    text = json.dumps(tree)
    assert "deep-clear" not in text and "listed-clear" not in text
    assert tree["outer"]["inner"]["node_secrets"] == {"k": SecretHasher(SALT).digest("deep-clear")}
    # A string under a key called "secrets" is a map entry, not a secrets field.
    assert tree["parameters"] == {"secrets": "not a secrets map"}


def test_a_hostile_secret_key_is_kept_as_it_is_and_its_value_hashed() -> None:
    hostile = 'sha256:"]\n\u202e' + "k" * 300
    request = pb.NodeStageVolumeRequest(
        volume_id="vol-1", secrets={hostile: "clear-value", "secrets": "nested-name"}
    )

    tree = whole().to_dict(request)

    assert set(tree["secrets"]) == {hostile, "secrets"}
    assert tree["secrets"][hostile] == SecretHasher(SALT).digest("clear-value")
    assert tree["secrets"]["secrets"] == SecretHasher(SALT).digest("nested-name")
    assert "clear-value" not in json.dumps(tree) and "nested-name" not in json.dumps(tree)


def test_a_secrets_map_of_non_strings_is_hashed_as_text() -> None:
    tree = whole().redacted({"secrets": {"n": 12345}})

    assert tree["secrets"]["n"] == SecretHasher(SALT).digest("12345")
