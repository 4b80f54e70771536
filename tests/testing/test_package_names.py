"""csi-mock installs two top-level packages, ``csi_mock`` and ``csi_harness``. A user
project with a package of its own called ``harness`` (a common name) must still run
pytest with the plugin loaded; before the harness moved under ``csi_harness._internal``
that failed with ``No module named 'harness.pytest_entry'``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_project_with_its_own_harness_package_runs_pytest_with_the_plugin(
    tmp_path: Path,
) -> None:
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "__init__.py").write_text('OWNER = "the user project"\n')
    (tmp_path / "test_own_package.py").write_text(
        textwrap.dedent(
            """
            import harness

            def test_both(pytestconfig):
                assert harness.OWNER == "the user project"
                assert pytestconfig.getoption("csi_cluster") == "local"
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_own_package.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_the_distribution_declares_only_its_two_packages() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == [
        "csi_mock*",
        "csi_harness*",
    ]
    entry_points = project["project"]["entry-points"]["pytest11"].values()
    scripts = project["project"]["scripts"].values()
    for target in [*entry_points, *scripts]:
        assert target.split(".")[0] in ("csi_mock", "csi_harness"), target
