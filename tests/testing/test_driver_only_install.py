"""A driver-only install (``pip install csi-mock``, without the ``harness`` extra) must
work: the driver and the unit-test fixtures import none of the harness or its
dependencies, and pytest still starts when those are absent."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

HARNESS_ONLY = ("csi_harness", "lightkube", "cryptography")


def block(*packages: str) -> str:
    """Code that makes ``packages`` unimportable, as in an environment without them."""
    return textwrap.dedent(
        f"""
        import importlib.abc, sys
        class Absent(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {packages!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None
        sys.meta_path.insert(0, Absent())
        """
    )


# Makes the harness's dependencies unimportable, as in an environment without the extra.
BLOCK_HARNESS_DEPENDENCIES = block("lightkube", "cryptography")


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_driver_and_its_test_fixtures_import_nothing_of_the_harness() -> None:
    code = textwrap.dedent(
        """
        import sys
        import csi_mock.cli, csi_mock.server, csi_mock.testing, csi_mock.pytest_fixtures
        import csi_mock.admin.ctl
        loaded = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1:]))
        print("loaded:", ",".join(loaded))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code, *HARNESS_ONLY],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "loaded:", result.stdout


def test_the_harness_entry_point_loads_the_plugin_only_with_its_dependencies() -> None:
    without = run_python(
        BLOCK_HARNESS_DEPENDENCIES
        + "import csi_harness._internal.pytest_entry as e; print(e.pytest_plugins, e.MISSING)"
    )
    assert without.returncode == 0, without.stderr
    assert without.stdout.strip() == "[] ['lightkube', 'cryptography']"
    with_them = run_python(
        "import csi_harness._internal.pytest_entry as e; print(e.pytest_plugins)"
    )
    assert with_them.stdout.strip() == "['csi_harness._internal.pytest_plugin']", with_them.stderr


def fixtures_listed(tmp_path: Path, *, block: bool) -> tuple[set[str], str]:
    """The fixture names `pytest --fixtures` lists in an empty directory."""
    code = (BLOCK_HARNESS_DEPENDENCIES if block else "") + textwrap.dedent(
        """
        import sys, pytest
        sys.exit(pytest.main(["--fixtures", "-p", "no:cacheprovider", "-q"]))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    names = {line.split()[0] for line in result.stdout.splitlines() if line and line[0] != " "}
    return names, result.stdout[-2000:] + result.stderr[-2000:]


def test_pytest_starts_with_the_csi_mock_fixture_and_without_the_harness(tmp_path: Path) -> None:
    names, output = fixtures_listed(tmp_path, block=True)
    assert {"csi_mock", "csi_mock_config"} <= names, output
    assert "kube" not in names and "driver" not in names, output


def test_with_the_harness_extra_pytest_has_both(tmp_path: Path) -> None:
    names, output = fixtures_listed(tmp_path, block=False)
    assert {"csi_mock", "csi_mock_config", "kube", "driver"} <= names, output


def test_csi_harness_without_its_extra_says_in_one_line_which_extra_to_install() -> None:
    module, _, function = PROJECT["scripts"]["csi-harness"].partition(":")
    code = BLOCK_HARNESS_DEPENDENCIES + textwrap.dedent(
        f"""
        import importlib
        sys.argv = ["csi-harness", "cluster", "status"]
        sys.exit(importlib.import_module({module!r}).{function}())
        """
    )

    result = run_python(code)

    assert (result.returncode, result.stdout) == (1, ""), result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "pip install 'csi-mock[harness]'" in result.stderr


def test_the_harness_extra_brings_pytest_for_its_plugin() -> None:
    names = {
        re.split(r"[^A-Za-z0-9_.-]", requirement)[0]
        for requirement in PROJECT["optional-dependencies"]["harness"]
    }

    assert "pytest" in names


def test_csi_mock_container_without_its_extra_names_the_extra() -> None:
    imported = run_python(block("testcontainers") + "import csi_mock.container")
    ran = subprocess.run(
        [
            sys.executable,
            "-c",
            block("testcontainers") + "import runpy\n"
            "runpy.run_module('csi_mock.container', run_name='__main__')",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert imported.returncode == 1
    assert imported.stderr.splitlines()[-1] == (
        "ModuleNotFoundError: csi_mock.container needs testcontainers, which comes with the"
        " containers extra: pip install 'csi-mock[containers]'"
    )
    assert (ran.returncode, ran.stdout) == (1, "")
    assert ran.stderr.splitlines() == [
        "csi_mock.container needs testcontainers, which comes with the containers extra:"
        " pip install 'csi-mock[containers]'"
    ]
