"""Links between the documents hold: every relative Markdown link reaches a file, and a
heading when it names one; every mention of a docs/ file anywhere in the repository
names a file that exists, and a section that exists when it quotes one."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from tests.docs.doc_blocks import REPO

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
MENTION = re.compile(r"\bdocs/[\w./-]*?\.md(?:#[\w-]+)?")
QUOTED_SECTION = re.compile(r"(docs/[\w./-]*?\.md),? \(?[\"“]([^\"”]+)[\"”]")
# Another repository's docs/ (csi-driver-host-path docs/storage-capacity-tracking.md).
OTHER_REPOSITORY = re.compile(r"(csi-driver-host-path|kubernetes(-csi)?/[\w-]+)\s+$")

# Mentions in files other engineers are changing, asked of them: the registry mirror is
# documented in docs/images.md. Remove an entry once its file is fixed.
ASKED: set[tuple[str, str]] = set()


def tracked_files() -> list[Path]:
    """The repository's files as git knows them (what CI's clean clone has)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
    )
    return [Path(name) for name in listed.stdout.split("\0") if name]


def markdown_files() -> list[Path]:
    return [path for path in tracked_files() if path.suffix == ".md"]


def prose(text: str) -> Iterator[tuple[int, str]]:
    """The lines of a Markdown text outside fenced code blocks, numbered from 1."""
    fence = ""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.lstrip(" >")
        marker = re.match(r"(`{3,}|~{3,})", stripped)
        if marker and not fence:
            fence = marker.group(1)
        elif marker and fence and stripped.startswith(fence):
            fence = ""
        elif not fence:
            yield number, line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def headings(path: Path) -> tuple[list[str], set[str]]:
    """A Markdown file's headings and their anchors (repeated ones numbered as GitHub
    numbers them)."""
    titles: list[str] = []
    anchors: set[str] = set()
    for _, line in prose((REPO / path).read_text()):
        match = re.match(r"#{1,6} (.+?)\s*#*\s*$", line)
        if match:
            titles.append(match.group(1))
            anchor = slug(match.group(1))
            repeated = sum(1 for title in titles[:-1] if slug(title) == anchor)
            anchors.add(f"{anchor}-{repeated}" if repeated else anchor)
    return titles, anchors


def sections(path: Path) -> list[str]:
    """What a mention may quote as a section: the headings, and the bold words that open
    a paragraph (``**Tests that need a feature gate** are marked ...``), in lower case."""
    bold = [
        match.group(1)
        for _, line in prose((REPO / path).read_text())
        if (match := re.match(r"\*\*([^*]+)\*\*", line))
    ]
    return [re.sub(r"`", "", title).lower() for title in [*headings(path)[0], *bold]]


def broken_link(source: Path, target: str) -> str | None:
    if re.match(r"[a-z]+:", target):
        return None
    file_part, _, anchor = target.partition("#")
    resolved = (REPO / source).parent / file_part if file_part else REPO / source
    if not resolved.resolve().is_relative_to(REPO) or not resolved.exists():
        return f"{target}: no such file"
    if anchor and resolved.suffix == ".md":
        relative = resolved.resolve().relative_to(REPO)
        if anchor not in headings(relative)[1]:
            return f"{target}: no heading with the anchor #{anchor} in {relative}"
    return None


def test_every_relative_link_of_the_markdown_files_reaches_its_file_and_heading() -> None:
    problems = []
    for path in markdown_files():
        for number, line in prose((REPO / path).read_text()):
            for target in LINK.findall(line):
                problem = broken_link(path, target)
                if problem:
                    problems.append(f"{path}:{number}: {problem}")
    assert problems == []


def test_every_mention_of_a_docs_file_names_one_that_exists() -> None:
    problems = []
    this_file = Path(__file__).resolve().relative_to(REPO)
    for path in tracked_files():
        if path.suffix in (".png", ".json", ".sum") or not (REPO / path).is_file():
            continue
        if path == this_file:  # its ASKED entries name what is missing
            continue
        try:
            text = (REPO / path).read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            for found in MENTION.finditer(line):
                mention = found.group(0)
                file_part, _, anchor = mention.partition("#")
                if OTHER_REPOSITORY.search(line[: found.start()]) or (
                    (str(path), file_part) in ASKED
                ):
                    continue
                if not (REPO / file_part).is_file():
                    problems.append(f"{path}:{number}: {mention}: no such file")
                elif anchor and anchor not in headings(Path(file_part))[1]:
                    problems.append(f"{path}:{number}: {mention}: no such heading")
            for file_part, section in QUOTED_SECTION.findall(line):
                if not (REPO / file_part).is_file():
                    continue
                if not any(
                    title.startswith(section.lower()) for title in sections(Path(file_part))
                ):
                    problems.append(f'{path}:{number}: {file_part} has no section "{section}"')
    assert problems == []


def test_the_slugs_are_githubs() -> None:
    assert slug("With a network and no Go: from `pip install` to the first test") == (
        "with-a-network-and-no-go-from-pip-install-to-the-first-test"
    )
    assert (
        slug("The kustomize base (`deploy/kubernetes/`)") == "the-kustomize-base-deploykubernetes"
    )
    assert slug("`csi-mock ctl`") == "csi-mock-ctl"
