"""What the wheel shows: its license, and a long description (docs/PYPI.md) written for
someone who installed it, whose driver examples run verbatim and whose harness example
imports only what csi_harness exports."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
LONG_DESCRIPTION = REPO / PROJECT["readme"]["file"]


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", LONG_DESCRIPTION.read_text(), re.S)


def test_the_license_file_is_the_one_the_metadata_names() -> None:
    assert PROJECT["license"] == "Apache-2.0"
    # Shipped by setuptools' default license-files patterns (LICEN[CS]E* and others).
    assert "license-files" not in PROJECT
    text = (REPO / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License")
    assert "Version 2.0, January 2004" in text


def test_the_long_description_needs_nothing_from_a_checkout() -> None:
    assert LONG_DESCRIPTION == REPO / "docs" / "PYPI.md"
    text = LONG_DESCRIPTION.read_text()
    commands = "\n".join(code_blocks("sh"))
    assert not re.search(r"^\s*make\b", commands, re.M), "a wheel has no Makefile"
    checkout_paths = re.findall(r"\b(?:docs|scripts|tests|examples|tools)/[\w./-]+", text)
    assert checkout_paths == [], f"paths a wheel does not have: {checkout_paths}"


def test_the_driver_examples_run_verbatim(tmp_path: Path) -> None:
    running, fixture_test, _harness = code_blocks("python")
    (tmp_path / "example.py").write_text(running)
    (tmp_path / "test_example.py").write_text(fixture_test)
    ran = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_example.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_harness_example_uses_only_the_public_api() -> None:
    *_, harness = code_blocks("python")
    compile(harness, "docs/PYPI.md", "exec")
    imports = [line for line in harness.splitlines() if line.startswith(("import", "from"))]
    exec("\n".join(imports), {})
    assert "csi_harness._internal" not in harness
