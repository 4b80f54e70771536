"""kind from PATH, checked: too old is refused with the reason and the fix."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from csi_harness._internal.core.tools import ToolsMissing
from csi_harness._internal.providers.kind import kind_binary
from csi_harness._internal.providers.kind.kind_binary import (
    KindVersionError,
    check_kind,
    find_kind,
    parse_kind_version,
)
from csi_harness._internal.providers.kind.node_image_traits import (
    NodeImageTraits,
    NodeImageUnusable,
    check_version,
)


def answering(output: str):  # type: ignore[no-untyped-def]
    def run(argv: Sequence[str], **_: object) -> str:
        assert list(argv)[1:] == ["version"]
        return output

    return run


def test_kind_version_is_read_from_its_output() -> None:
    assert parse_kind_version("kind v0.33.0 go1.26.8 linux/amd64") == (0, 33, 0)


def test_the_pinned_version_and_newer_are_accepted() -> None:
    assert check_kind("kind", answering("kind v0.33.0 go1.26.8 linux/amd64")) == (0, 33, 0)
    assert check_kind("kind", answering("kind v0.34.1 go1.27 linux/amd64")) == (0, 34, 1)


def test_an_older_kind_is_refused_with_the_reason_and_the_fix() -> None:
    with pytest.raises(
        KindVersionError, match=r"kind v0\.20\.0, older than v0\.33\.0.*tools build kind"
    ):
        check_kind("/usr/local/bin/kind", answering("kind v0.20.0 go1.20.4 linux/amd64"))


def test_kind_on_path_comes_first_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind = tmp_path / "kind"
    kind.write_text("#!/bin/sh\necho 'kind v0.33.0 go1.26.8 linux/amd64'\n")
    kind.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_kind(prefer_path=True) == str(kind)


def test_without_any_kind_the_error_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(kind_binary, "tool_binary", lambda name: None)
    with pytest.raises(ToolsMissing, match=r"install kind v0\.33\.0 or newer on PATH"):
        find_kind(prefer_path=True)


def test_a_node_image_of_another_kubernetes_minor_is_refused() -> None:
    traits = NodeImageTraits("kindest/node:v1.31.0", "v1.31.0", True)
    with pytest.raises(NodeImageUnusable, match=r"runs Kubernetes v1\.31\.0, not 1\.37\.x"):
        check_version(traits, "v1.37.1")


def test_a_patch_release_or_a_branch_build_of_the_pinned_minor_is_fine() -> None:
    check_version(NodeImageTraits("x", "v1.37.3", True), "v1.37.1")
    check_version(NodeImageTraits("x", "v1.37.2-rc.0.12+abcdef", False), "v1.37.1")


def test_a_driver_image_that_names_its_registry_is_pulled_not_loaded() -> None:
    from csi_harness._internal.providers.kind.suite_images import names_a_registry

    assert names_a_registry("localhost:5001/csi-mock:0.1.0")
    assert names_a_registry("ghcr.io/me/csi-mock:1")
    assert not names_a_registry("csi-mock:dev")
    assert not names_a_registry("me/csi-mock:dev")


def test_csi_mocks_image_built_here_is_always_loaded_whatever_its_name() -> None:
    from csi_harness._internal.providers.kind.suite_images import driver_image_to_load

    built = driver_image_to_load(None, lambda: "csi-mock.local/csi-mock:dev", lambda _: False)
    assert built == ("csi-mock.local/csi-mock:dev", True)
    assert driver_image_to_load("me/csi-mock:dev", lambda: "x", lambda _: True) == (
        "me/csi-mock:dev",
        True,
    )
    pulled = driver_image_to_load("localhost:5001/csi-mock:1", lambda: "x", lambda _: True)
    assert pulled == ("localhost:5001/csi-mock:1", False)
