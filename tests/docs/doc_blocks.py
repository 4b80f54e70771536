"""The code blocks of README.md and docs/, read with Sybil, and how each one runs.

The convention (docs/testing.md, "Examples that run"):

- a ```python block is a program, or a pytest module when it defines ``test_``
  functions; it runs on its own in an empty directory where only csi-mock's two packages
  are importable (as from the wheel), never this checkout's tests or private modules;
- a ```sh block runs on its own in an empty directory with ``bash -eu -o pipefail``;
- ``<!-- skip: next "REASON" -->`` (Sybil's skip directive) on the line before a block
  says why it does not run; REASON is one of ``REASONS``;
- ``<!-- run: with a driver -->`` before a sh block: the document's such blocks run in
  order against one csi-mock the test starts, whose admin socket is ``$S`` and
  ``$CSI_MOCK_ADMIN_SOCKET``;
- ``<!-- run: as a configuration -->`` before a yaml block: csi-mock's configuration
  model validates it;
- other languages (yaml, json, text, none) are data or output and are not run.

docs/records/ holds logs of what was run on a given day: not examples, not run.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sybil import Document, Example, Sybil
from sybil.parsers.abstract.lexers import LexerCollection
from sybil.parsers.markdown import CodeBlockParser, SkipParser
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, FencedCodeBlockLexer
from sybil.region import Region

REPO = Path(__file__).resolve().parents[2]

REASONS = (
    "needs a cluster",
    "needs root",
    "needs Docker",
    "needs the network",
    "needs a checkout",
    "needs the driver started above",
    "runs until stopped",
    "takes minutes",
)
"""Why a python or sh block may be left out. Each names what the test run does not have
(a cluster, root, a Docker engine, a package index or the Go module proxy, this
repository's Makefile and scripts, a driver an earlier block started and left running)
or cannot wait for."""

RUN_LANGUAGES = ("python", "sh")
DATA_LANGUAGES = ("yaml", "json", "text", "")
WITH_A_DRIVER = "with a driver"
AS_A_CONFIGURATION = "as a configuration"


def documents() -> list[Path]:
    """README.md and the guides of docs/ (not docs/records/), relative to the repository."""
    return [Path("README.md"), *sorted(p.relative_to(REPO) for p in (REPO / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Block:
    """One fenced block of a document, as Sybil found it."""

    path: Path
    line: int
    language: str
    source: str = field(repr=False)
    skip: str | None
    """The reason given by a skip directive on the line before, else None."""
    run: str | None
    """What a run directive on the line before says (``WITH_A_DRIVER``,
    ``AS_A_CONFIGURATION``), else None."""
    example: Example | None = field(repr=False)
    """Sybil's example for a python or sh block: evaluating it runs the block."""

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language in RUN_LANGUAGES and self.skip is None

    @property
    def with_driver(self) -> bool:
        return self.run == WITH_A_DRIVER


class RunDirectiveParser:
    """``<!-- run: with a driver -->`` and ``<!-- run: as a configuration -->``, in Sybil's
    directive-in-comment syntax."""

    def __init__(self) -> None:
        self.lexers = LexerCollection([DirectiveInHTMLCommentLexer("run", arguments=".+?")])

    def __call__(self, document: Document) -> Iterator[Region]:
        for lexed in self.lexers(document):
            yield Region(lexed.start, lexed.end, ("run", lexed.lexemes["arguments"].strip()))


class OtherFenceParser:
    """Every fenced block that is not python or sh, so that none goes unaccounted for."""

    def __init__(self) -> None:
        self.lexers = LexerCollection(
            [
                FencedCodeBlockLexer(
                    language=r"[^\n]*", mapping={"language": "language", "source": "source"}
                )
            ]
        )

    def __call__(self, document: Document) -> Iterator[Region]:
        for lexed in self.lexers(document):
            language = lexed.lexemes["language"].strip()
            if language not in RUN_LANGUAGES:
                yield Region(lexed.start, lexed.end, ("fence", language, lexed.lexemes["source"]))


Evaluator = Callable[[Example], str | None]


def parse(path: Path, python: Evaluator, shell: Evaluator) -> list[Block]:
    """The blocks of one document, in order, with the directives that apply to them.

    ``python`` and ``shell`` become the Sybil evaluators of the python and sh blocks."""
    sybil = Sybil(
        parsers=[
            SkipParser(),
            RunDirectiveParser(),
            CodeBlockParser("python", python),
            CodeBlockParser("sh", shell),
            OtherFenceParser(),
        ],
        path=str(REPO),
    )
    document = sybil.parse(REPO / path)
    blocks: list[Block] = []
    pending: tuple[str, str] | None = None
    for example in document.examples():
        parsed = example.region.parsed
        if isinstance(parsed, tuple) and parsed and parsed[0] in ("next", "start", "end"):
            action, reason = parsed
            if action != "next" or not reason:
                raise ValueError(
                    f'{path}:{example.line}: only skip: next "REASON" is used here,'
                    f" with a reason from {REASONS}"
                )
            pending = ("skip", ast.literal_eval(reason.strip()))
            continue
        if isinstance(parsed, tuple) and parsed and parsed[0] == "run":
            if parsed[1] not in (WITH_A_DRIVER, AS_A_CONFIGURATION):
                raise ValueError(f"{path}:{example.line}: unknown run directive {parsed[1]!r}")
            pending = ("run", parsed[1])
            continue
        if isinstance(parsed, tuple) and parsed and parsed[0] == "fence":
            language, source, runnable = parsed[1], str(parsed[2]), None
        else:
            language = "python" if example.region.evaluator is python else "sh"
            source, runnable = str(parsed), example
        blocks.append(
            Block(
                path=path,
                line=example.line,
                language=language,
                source=source,
                skip=pending[1] if pending and pending[0] == "skip" else None,
                run=pending[1] if pending and pending[0] == "run" else None,
                example=runnable,
            )
        )
        pending = None
    return blocks


def private_imports(source: str) -> list[str]:
    """The imports of a python block that a project with only the wheel cannot make, or
    should not: this checkout's tests, and private modules or names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
            names: list[str] = []
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
            names = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[0] in ("tests", "harness", "scripts", "benchmarks") or any(
                re.match(r"_[a-z]", part) for part in parts
            ):
                found.append(module)
        found += [f"{modules[0]}.{name}" for name in names if re.match(r"_[a-z]", name)]
    return found


def defines_tests(source: str) -> bool:
    """Whether a python block is a pytest module (a top-level ``test_`` function)."""
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")
        for node in ast.parse(source).body
    )
