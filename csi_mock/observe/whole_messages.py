"""Whole requests and replies as JSON-able dicts, with every secret hashed.

A CSI secret is never kept in clear: every map field named ``secrets`` or ending in
``_secrets``, at any depth, keeps its keys and gets ``sha256:<hex>`` of a per-process
salt and the value in place of each value; so does a service-account token handed in
``volume_context`` (``csi.storage.k8s.io/serviceAccount.tokens``). A test learns which
secret arrived by asking the driver to hash a candidate with the same salt
(`SecretHasher.digest`), without the clear value ever being stored or returned.
"""

from __future__ import annotations

import hashlib
import secrets as random_source
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

SECRET_CONTEXT_KEYS = frozenset({"csi.storage.k8s.io/serviceAccount.tokens"})
"""Keys of a string map whose values are secrets although the field is not `secrets`."""
HASH_PREFIX = "sha256:"


def is_secrets_field(name: str) -> bool:
    return name == "secrets" or name.endswith("_secrets")


class SecretHasher:
    """Salted SHA-256 of secret values; the salt is random per process and never shown."""

    def __init__(self, salt: bytes | None = None) -> None:
        self._salt = salt if salt is not None else random_source.token_bytes(32)

    def digest(self, value: str) -> str:
        return HASH_PREFIX + hashlib.sha256(self._salt + value.encode("utf-8")).hexdigest()


class WholeMessages:
    """Turns requests and replies into dicts that hold no secret in clear."""

    def __init__(self, hasher: SecretHasher) -> None:
        self.hasher = hasher

    def to_dict(self, message: Message) -> dict[str, Any]:
        """Field names as in the proto, enums by name, int64 as strings (proto3 JSON)."""
        tree = json_format.MessageToDict(message, preserving_proto_field_name=True)
        return self.redacted(tree)

    def redacted(self, tree: dict[str, Any]) -> dict[str, Any]:
        """`tree` with its secrets hashed (changed in place and returned)."""
        for name, value in tree.items():
            if isinstance(value, dict):
                if is_secrets_field(name):
                    tree[name] = {key: self._hash(v) for key, v in value.items()}
                else:
                    self.redacted(value)
            elif isinstance(value, list):
                for element in value:
                    if isinstance(element, dict):
                        self.redacted(element)
            elif name in SECRET_CONTEXT_KEYS:
                tree[name] = self._hash(value)
        return tree

    def _hash(self, value: Any) -> str:
        # A secrets map is map<string, string>; anything else is hashed as its text.
        return self.hasher.digest(value if isinstance(value, str) else str(value))
