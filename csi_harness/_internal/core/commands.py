"""Running a command to completion, its output as the answer, its failure as one error."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

OUTPUT_SHOWN = 3000
"""Characters of a failed command's output (its end) that the error message shows."""
ARGUMENT_SHOWN = 80
"""Characters of one argument that the error message shows (a program passed with
``python3 -c`` is cut to its first line)."""


def shown_argv(argv: Sequence[str]) -> str:
    """The command line for a message: each argument cut to its first line and to
    ``ARGUMENT_SHOWN`` characters."""

    def shown(argument: str) -> str:
        first = argument.partition("\n")[0]
        cut = first != argument or len(first) > ARGUMENT_SHOWN
        return first[:ARGUMENT_SHOWN] + "…" if cut else first

    return " ".join(shown(argument) for argument in argv)


class CommandFailed(RuntimeError):
    """A command could not run, did not finish in time or exited non-zero; the message
    has the end of its output (stderr, then stdout)."""

    def __init__(self, argv: Sequence[str], returncode: int | None, output: str) -> None:
        detail = output.strip()[-OUTPUT_SHOWN:] or "(no output)"
        outcome = "failed" if returncode is None else f"exited with {returncode}"
        super().__init__(f"`{shown_argv(argv)}` {outcome}:\n{detail}")
        self.argv = list(argv)
        self.returncode = returncode
        """None: it did not run, or did not finish in time."""
        self.output = output


class Runner(Protocol):
    def __call__(self, argv: Sequence[str], *, cwd: Path | None = None) -> str:
        """Run ``argv`` (in ``cwd``) to completion; return its stdout or raise CommandFailed."""
        ...


def run_command(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> str:
    """Run ``argv`` (in ``cwd``, with ``env`` instead of this process's environment, for
    at most ``timeout`` seconds) with its output captured; its stdout, or CommandFailed."""
    try:
        result = subprocess.run(
            list(argv),
            cwd=cwd,
            env=None if env is None else dict(env),
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise CommandFailed(argv, None, f"did not finish within {timeout:g}s") from exc
    except OSError as exc:
        raise CommandFailed(argv, None, str(exc)) from exc
    if result.returncode != 0:
        raise CommandFailed(argv, result.returncode, result.stderr + result.stdout)
    return result.stdout
