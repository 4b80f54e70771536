"""tools/genwrap.py's version arithmetic: the order of Go module versions and which
modules a wrapper raises to share compiled packages with other units."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "genwrap", Path(__file__).resolve().parents[2] / "tools" / "genwrap.py"
)
genwrap = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(genwrap)


def gomod(requires: dict[str, str], replaces: dict[str, str] | None = None) -> dict:
    """A go.mod as `go mod edit -json` prints it; replaces are same-path ones."""
    return {
        "Require": [{"Path": p, "Version": v} for p, v in requires.items()],
        "Replace": [
            {"Old": {"Path": p}, "New": {"Path": p, "Version": v}}
            for p, v in (replaces or {}).items()
        ],
    }


def test_versions_sort_as_go_sorts_them() -> None:
    ordered = [
        "v0.0.0-20250101000000-aaaaaaaaaaaa",
        "v0.0.0-20260218203240-3dfff04db8fa",
        "v1.2.3-beta",
        "v1.2.3-rc.1",
        "v1.2.3-rc.10",
        "v1.2.3",
        "v1.36.12-0.20260120151049-f2248ac996af",
        "v1.36.12",
        "v2.0.0+incompatible",
        "v10.0.0",
    ]
    assert sorted(reversed(ordered), key=genwrap.semver_key) == ordered


def test_a_string_that_is_not_a_version_is_refused() -> None:
    with pytest.raises(SystemExit, match="not a module version: 'latest'"):
        genwrap.semver_key("latest")


def test_a_same_path_replace_is_the_version_a_go_mod_selects() -> None:
    mod = gomod(
        {"k8s.io/api": "v0.0.0", "google.golang.org/grpc": "v1.82.1"}, {"k8s.io/api": "v0.37.1"}
    )
    assert genwrap.module_versions(mod) == {
        "k8s.io/api": "v0.37.1",
        "google.golang.org/grpc": "v1.82.1",
    }


def test_modules_are_raised_to_the_highest_version_of_the_others_never_lowered() -> None:
    own = gomod(
        {
            "google.golang.org/grpc": "v1.81.1",
            "golang.org/x/net": "v0.59.0",
            "github.com/only/here": "v1.0.0",
        }
    )
    others = [
        gomod({"google.golang.org/grpc": "v1.83.2", "golang.org/x/net": "v0.57.0"}),
        gomod({"google.golang.org/grpc": "v1.84.0", "github.com/not/needed": "v9.0.0"}),
    ]
    assert genwrap.version_raises(own, others) == ["-require=google.golang.org/grpc@v1.84.0"]


def test_a_replaced_module_moves_within_its_minor_release_only() -> None:
    own = gomod(
        {"k8s.io/api": "v0.36.1", "k8s.io/client-go": "v0.37.0"},
        {"k8s.io/api": "v0.36.1", "k8s.io/client-go": "v0.37.0"},
    )
    others = [gomod({}, {"k8s.io/api": "v0.37.1", "k8s.io/client-go": "v0.37.1"})]
    assert genwrap.version_raises(own, others) == [
        "-replace=k8s.io/client-go=k8s.io/client-go@v0.37.1"
    ]


def test_nothing_to_raise_is_no_edit() -> None:
    same = gomod({"google.golang.org/grpc": "v1.84.0"})
    assert genwrap.version_raises(same, [same]) == []
