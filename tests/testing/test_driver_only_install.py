"""A driver-only install (``pip install csi-mock``, without the ``harness`` extra) must
work: the driver and the unit-test fixtures import none of the harness or its
dependencies, and pytest still starts when those are absent."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

HARNESS_ONLY = ("csi_harness", "lightkube", "cryptography")

# Makes the harness's dependencies unimportable, as in an environment without the extra.
BLOCK_HARNESS_DEPENDENCIES = textwrap.dedent(
    """
    import importlib.abc, sys
    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("lightkube", "cryptography"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None
    sys.meta_path.insert(0, Absent())
    """
)


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
