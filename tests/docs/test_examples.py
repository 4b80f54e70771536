"""Every python and sh block of README.md and docs/ runs as printed, or says why not.

A python block runs in an empty directory where only csi-mock's two packages are
importable, as in a project with nothing but the wheel installed; a pytest module is run
by pytest there. A sh block runs there under bash. With ``CSI_MOCK_DOCS_PYTHON`` set to
the interpreter of an environment where csi-mock is installed (scripts/user-project.sh
sets its fresh virtualenv's, with the wheel), the blocks run with that interpreter, its
installed packages and its commands instead of this tree's packages. Blocks marked
``<!-- run: with a driver -->`` run in order against one csi-mock per document. The
convention is in tests/docs/doc_blocks.py and docs/testing.md ("Examples that run")."""

from __future__ import annotations

import ast
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from sybil import Example

from csi_harness._internal.core.cluster_guard import NO_CLUSTER_ENV
from csi_mock.config import validate_config
from csi_mock.proto import csi_pb2, csi_pb2_grpc
from csi_mock.testing import RunningCsiMock, running_csi_mock
from tests.docs.doc_blocks import (
    AS_A_CONFIGURATION,
    DATA_LANGUAGES,
    REASONS,
    REPO,
    RUN_LANGUAGES,
    Block,
    defines_tests,
    documents,
    parse,
    private_imports,
)

TIMEOUT = 120
DOCS_PYTHON = "CSI_MOCK_DOCS_PYTHON"

# The driver that a document's "with a driver" blocks talk to: the pools, kinds and
# switches its examples name.
DRIVERS: Mapping[str, Mapping[str, Any]] = {
    "docs/admin-api.md": {
        "kinds": {"striped": {"cost": 1}, "mirrored": {"cost": 2}},
        "default_kind": "striped",
        "pools": [
            {
                "name": "node-1",
                "segment": {"topology.csi-mock.example/node": "node-1"},
                "size": "10Gi",
                "max_volume_size": "4Gi",
            }
        ],
        "node": {"volume_health": True, "storage_health": True},
        "controller": {"volume_condition": True},
    },
}


def installed_python() -> Path | None:
    """The interpreter ``DOCS_PYTHON`` names, whose installed csi-mock the examples use;
    None: they use this tree's packages (``wheel_only_path``)."""
    named = os.environ.get(DOCS_PYTHON)
    return Path(named) if named else None


@contextmanager
def example_packages() -> Iterator[Path | None]:
    """What goes on the examples' PYTHONPATH: None when they run with an installed
    csi-mock (``installed_python``), else the links of ``wheel_only_path``."""
    if installed_python() is not None:
        yield None
        return
    with wheel_only_path() as packages:
        yield packages


@contextmanager
def wheel_only_path() -> Iterator[Path]:
    """A directory holding only csi_mock and csi_harness (links into this tree), for
    PYTHONPATH: an example sees what the wheel installs and nothing else of the checkout,
    whatever an editable install elsewhere on the machine points to."""
    with tempfile.TemporaryDirectory(prefix="doc-path-") as directory:
        for package in ("csi_mock", "csi_harness"):
            (Path(directory) / package).symlink_to(REPO / package)
        yield Path(directory)


def example_environment(packages: Path | None, extra: Mapping[str, str] = {}) -> dict[str, str]:
    """This process's environment without pytest's and Python's settings, with the
    cluster guard on: an example that would bring a cluster up fails instead. With an
    installed csi-mock, its environment's commands (``csi-mock``, ``pytest``) come
    first on PATH."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "PYTHON", "COV_"))
    }
    guard = {NO_CLUSTER_ENV: "a documentation example, which runs without a cluster"}
    installed = installed_python()
    if installed is not None:
        environment["PATH"] = f"{installed.parent}{os.pathsep}{environment.get('PATH', '')}"
    path = {"PYTHONPATH": str(packages)} if packages is not None else {}
    return {**environment, **guard, **path, **extra}


def run_in_empty_project(
    files: Mapping[str, str], command: list[str], extra: Mapping[str, str] = {}
) -> tuple[int | None, str]:
    """Run ``command`` in a fresh empty directory holding ``files``: its exit status (None
    when it was still running after ``TIMEOUT``) and what it printed. It runs in a session
    of its own, which is killed afterwards, so nothing it started outlives the test."""
    with tempfile.TemporaryDirectory(prefix="doc-") as project, example_packages() as packages:
        for name, text in files.items():
            Path(project, name).write_text(text)
        process = subprocess.Popen(
            command,
            cwd=project,
            env=example_environment(packages, extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            return None, output
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
    return process.returncode, output


def failure(status: int | None, output: str) -> str | None:
    """Sybil's verdict: None for success, else the message."""
    if status is None:
        return f"still running after {TIMEOUT} s:\n{output}"
    return None if status == 0 else f"exit {status}\n{output}"


def run_python(example: Example) -> str | None:
    source = str(example.parsed)
    python = str(installed_python() or sys.executable)
    if not defines_tests(source):
        ran = run_in_empty_project({"example.py": source}, [python, "example.py"])
        return failure(*ran)
    pytest_command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    status, output = run_in_empty_project(
        {"test_example.py": source}, [*pytest_command, "test_example.py"]
    )
    if status == 0 and re.search(r"\d+ (skipped|xfailed|xpassed|deselected)", output):
        return f"not every test passed:\n{output}"
    return failure(status, output)


def run_shell(example: Example, extra: Mapping[str, str] = {}) -> str | None:
    return failure(
        *run_in_empty_project(
            {"example.sh": str(example.parsed)},
            ["bash", "-eu", "-o", "pipefail", "example.sh"],
            extra,
        )
    )


BLOCKS = [block for path in documents() for block in parse(path, run_python, run_shell)]
ON_THEIR_OWN = [
    pytest.param(block, id=block.id) for block in BLOCKS if block.runs and not block.with_driver
]
WITH_A_DRIVER = sorted({str(block.path) for block in BLOCKS if block.with_driver})


@pytest.mark.parametrize("block", ON_THEIR_OWN)
def test_the_example_runs_as_printed(block: Block) -> None:
    assert block.example is not None
    block.example.evaluate()


def create_volume(driver: RunningCsiMock, name: str) -> str:
    """A 1Gi mount volume on the driver, made as a CO would make it; its ID."""
    request = csi_pb2.CreateVolumeRequest(
        name=name,
        capacity_range=csi_pb2.CapacityRange(required_bytes=1 << 30),
        volume_capabilities=[
            csi_pb2.VolumeCapability(
                mount=csi_pb2.VolumeCapability.MountVolume(),
                access_mode=csi_pb2.VolumeCapability.AccessMode(
                    mode=csi_pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
                ),
            )
        ],
    )
    controller = csi_pb2_grpc.ControllerStub(driver.channel())
    return str(controller.CreateVolume(request, timeout=10).volume.volume_id)


@pytest.mark.parametrize("document", WITH_A_DRIVER)
def test_the_commands_run_in_order_against_a_driver(document: str) -> None:
    with running_csi_mock(DRIVERS[document]) as driver:
        socket = str(driver.admin_socket_path)
        environment = {
            "S": socket,
            "CSI_MOCK_ADMIN_SOCKET": socket,
            "ID": create_volume(driver, "pvc-1"),
        }
        for block in BLOCKS:
            if str(block.path) == document and block.with_driver and block.skip is None:
                assert block.example is not None
                problem = run_shell(block.example, environment)
                assert problem is None, f"{block.id}: {problem}"


@pytest.mark.parametrize(
    "block",
    [pytest.param(block, id=block.id) for block in BLOCKS if block.run == AS_A_CONFIGURATION],
)
def test_the_configuration_is_one_csi_mock_accepts(block: Block) -> None:
    validate_config(yaml.safe_load(block.source), source=block.id)


def test_every_block_is_run_or_says_why_not() -> None:
    problems = []
    for block in BLOCKS:
        if block.language not in RUN_LANGUAGES + DATA_LANGUAGES:
            problems.append(f"{block.id}: language {block.language!r} (sh, python or data)")
        if block.skip is not None and block.skip not in REASONS:
            problems.append(f"{block.id}: reason {block.skip!r} is not one of {REASONS}")
        if block.skip is not None and block.language not in RUN_LANGUAGES:
            problems.append(f"{block.id}: a skip directive before a {block.language!r} block")
        if block.with_driver and (block.language != "sh" or str(block.path) not in DRIVERS):
            problems.append(f"{block.id}: 'with a driver' needs a sh block and DRIVERS entry")
        if block.run == AS_A_CONFIGURATION and block.language != "yaml":
            problems.append(f"{block.id}: 'as a configuration' needs a yaml block")
    assert problems == []


def test_python_examples_import_only_what_the_wheel_offers() -> None:
    found = {
        block.id: private_imports(block.source)
        for block in BLOCKS
        if block.language == "python" and private_imports(block.source)
    }
    assert found == {}


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(block, id=block.id)
        for block in BLOCKS
        if block.language == "python" and block.skip is not None
    ],
)
def test_an_example_that_does_not_run_still_compiles_and_imports(block: Block) -> None:
    tree = ast.parse(block.source, block.id)
    imports: list[ast.stmt] = [
        node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    assert imports, f"{block.id}: an example that does not run shows its imports"
    exec(compile(ast.Module(body=imports, type_ignores=[]), block.id, "exec"), {})
