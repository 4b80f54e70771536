"""Finding the pinned binaries through tools/build.sh."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from csi_harness._internal.core.commands import CommandFailed
from csi_harness._internal.core.package_data import TOOLS_SCRIPT
from csi_harness._internal.core.tools import ToolsMissing, tool_binary, tool_path


def test_tool_path_failure_names_the_tool() -> None:
    def failing(argv: Sequence[str], *, cwd: Path | None = None) -> str:
        raise CommandFailed(argv, 1, "tools: unknown tool 'kind'")

    with pytest.raises(ToolsMissing, match=r"(?s)cannot locate kind: .*unknown tool"):
        tool_path("kind", failing)


def test_tool_path_refuses_empty_output() -> None:
    with pytest.raises(ToolsMissing, match="printed nothing"):
        tool_path("kind", lambda argv, *, cwd=None: "\n")


def test_tool_path_asks_the_build_script_for_the_named_binary() -> None:
    asked: list[list[str]] = []

    def runner(argv: Sequence[str], *, cwd: Path | None = None) -> str:
        asked.append(list(argv))
        return "/tools/bin/kind\n"

    assert tool_path("kind", runner) == "/tools/bin/kind"
    assert asked == [["bash", str(TOOLS_SCRIPT), "path", "kind"]]


def test_a_tool_the_build_script_does_not_know_is_no_binary() -> None:
    assert tool_binary("no-such-tool-at-all") is None
