"""Running a command: its stdout as the answer, every way it can fail as CommandFailed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from csi_harness._internal.core.commands import CommandFailed, run_command, shown_argv


def test_run_command_returns_stdout_and_runs_in_cwd(tmp_path: Path) -> None:
    assert run_command(["pwd"], cwd=tmp_path).strip() == str(tmp_path)


def test_run_command_failure_carries_the_command_code_and_output() -> None:
    with pytest.raises(CommandFailed) as failure:
        run_command(["sh", "-c", "echo broken >&2; exit 3"])
    assert failure.value.returncode == 3
    assert "broken" in str(failure.value)
    assert "`sh -c echo broken >&2; exit 3` exited with 3" in str(failure.value)


def test_run_command_reports_a_missing_binary_as_command_failed(tmp_path: Path) -> None:
    with pytest.raises(CommandFailed, match="No such file"):
        run_command([str(tmp_path / "no-such-kind")])


def test_a_command_that_takes_too_long_fails_naming_its_timeout() -> None:
    with pytest.raises(CommandFailed, match=r"failed:\ndid not finish within 0.2s") as failure:
        run_command(["sleep", "5"], timeout=0.2)
    assert failure.value.returncode is None


def test_run_command_passes_the_environment_given() -> None:
    assert run_command(["sh", "-c", "echo $ONLY"], env={"ONLY": "this"}) == "this\n"


def test_a_message_shows_a_program_argument_by_its_first_line_only() -> None:
    program = "import sys\n" + "x = 1\n" * 100
    with pytest.raises(CommandFailed) as failure:
        run_command([sys.executable, "-c", program + "sys.exit('no socket')"])
    message = str(failure.value)
    assert f"`{sys.executable} -c import sys…` exited with 1:\nno socket" == message
    assert shown_argv(["echo", "y" * 100]) == "echo " + "y" * 80 + "…"
