"""`csi-harness tools`: the packaged tools/build.sh behind the harness's command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from csi_harness._internal.cli import main
from csi_harness._internal.cli.commands import TOOLS_COMMANDS


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty tools cache of this test's own (CSI_MOCK_TOOLS_DIR)."""
    monkeypatch.setenv("CSI_MOCK_TOOLS_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("command", TOOLS_COMMANDS)
def test_help_of_a_tools_command_prints_its_usage_and_does_nothing_else(
    command: str, flag: str, cache: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # Builds the current pins do not use: what `prune` would delete.
    stale = [cache / "store" / "kind-v0.0.1-0123456789abcdef", cache / "ts-0123456789ab"]
    for directory in stale:
        directory.mkdir(parents=True)

    code = main(["tools", command, flag])

    out, err = capfd.readouterr()
    assert (code, err) == (0, ""), out
    assert out.startswith(f"usage: csi-harness tools {command}"), out
    assert all(directory.is_dir() for directory in stale)


def test_help_of_a_tools_command_needs_no_go(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # bash and sed, no Go toolchain

    code = main(["tools", "build", "--help"])

    out, err = capfd.readouterr()
    assert (code, err) == (0, "")
    assert out.startswith("usage: csi-harness tools build [TOOL...]")


def test_path_of_a_tool_not_built_exits_1_naming_the_command_that_builds_it(
    cache: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    code = main(["tools", "path", "kubectl"])

    out, err = capfd.readouterr()
    assert (code, out) == (1, "")
    assert "kubectl is not built" in err
    assert "csi-harness tools build kubectl" in err


@pytest.mark.parametrize("command", ["build", "path"])
def test_an_unknown_tool_is_a_usage_error_exit_2(
    command: str, cache: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    code = main(["tools", command, "no-such-tool"])

    out, err = capfd.readouterr()
    assert (code, out) == (2, "")
    assert "unknown tool 'no-such-tool' (try: csi-harness tools list)" in err
