"""Fixtures every test directory may use, and the rules of this checkout's sessions:

* A bare ``pytest`` runs only what needs no cluster: the end-to-end suites (marked
  ``e2e``, all in tests/e2e) are deselected, and one line at the end says how to run
  them. They run with ``-m EXPR`` (any marker expression: the choice is then yours,
  ``-m e2e`` for them alone), with ``--with-e2e`` (everything), or when a path inside
  tests/e2e is named on the command line.
* Every other test runs under the cluster guard (``core.cluster_guard``): if it
  brings up, tears down or enters a real cluster, directly or through a command it
  starts, that fails at once naming the test.
* Under pytest-xdist the tests that took longest in an earlier run start first
  (tests/durations.py), so the workers finish together.
* Tests marked ``finding`` reproduce a Kubernetes behaviour (docs/findings.md) that
  any unrelated cluster event can hide: they run only when ``-m`` names the marker.
* ``--proven-elsewhere PREFIX`` leaves out tests that another part of the same run
  proves (CI runs the kind suites on kind, not again locally), except those that
  ``--not-proven-elsewhere`` names.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path

import pytest

from csi_harness._internal.core.cluster_guard import NO_CLUSTER_ENV
from tests.durations import load_durations, longest_first

E2E_DIR = Path(__file__).resolve().parent / "e2e"
E2E_MARKER = "e2e"
FINDING_MARKER = "finding"
WITH_E2E = "--with-e2e"
PROVEN_ELSEWHERE = "--proven-elsewhere"
NOT_PROVEN_ELSEWHERE = "--not-proven-elsewhere"
_DESELECTED = pytest.StashKey[int]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        WITH_E2E,
        action="store_true",
        help="also run the end-to-end suites (tests/e2e, marked e2e), which bring up a "
        "cluster; without it or -m, a bare `pytest` runs only the tests that need none",
    )
    parser.addoption(
        PROVEN_ELSEWHERE,
        action="append",
        default=[],
        metavar="PREFIX",
        help="leave out the tests whose node id starts with PREFIX, as another part of "
        "the run proves them (CI's local part and its kind part); repeatable",
    )
    parser.addoption(
        NOT_PROVEN_ELSEWHERE,
        action="append",
        default=[],
        metavar="PREFIX",
        help=f"but run these (node id prefix) even so: the other part leaves them out "
        f"or cannot run them; repeatable, only with {PROVEN_ELSEWHERE}",
    )


def proven_elsewhere(nodeid: str, elsewhere: Sequence[str], not_elsewhere: Sequence[str]) -> bool:
    """Whether ``nodeid`` is left to another part of the run: a prefix of ``elsewhere``
    names it and none of ``not_elsewhere`` does."""
    return any(nodeid.startswith(p) for p in elsewhere) and not any(
        nodeid.startswith(p) for p in not_elsewhere
    )


def e2e_wanted(*, with_e2e: bool, markexpr: str, args: Sequence[str], invocation_dir: Path) -> bool:
    """Whether the session runs the end-to-end suites: asked for by ``--with-e2e``, a
    marker expression, or a path inside tests/e2e among the arguments."""
    if with_e2e or markexpr:
        return True
    for arg in args:
        path = (invocation_dir / arg.split("::", 1)[0]).resolve()
        if path.is_relative_to(E2E_DIR):
            return True
    return False


def _wants_e2e(config: pytest.Config) -> bool:
    named = config.args if config.args_source == pytest.Config.ArgsSource.ARGS else []
    return e2e_wanted(
        with_e2e=bool(config.getoption(WITH_E2E)),
        markexpr=str(config.getoption("markexpr", "") or ""),
        args=named,
        invocation_dir=config.invocation_params.dir,
    )


def pytest_configure(config: pytest.Config) -> None:
    # Under pytest-xdist the longest tests come first (see pytest_collection_modifyitems).
    # Its default first batch gives each worker a run of consecutive tests, which would
    # hand all of them to one worker: one test at a time spreads them.
    if getattr(config.option, "maxschedchunk", "absent") is None:
        config.option.maxschedchunk = 1
    if config.getoption(NOT_PROVEN_ELSEWHERE) and not config.getoption(PROVEN_ELSEWHERE):
        raise pytest.UsageError(f"{NOT_PROVEN_ELSEWHERE} is an exception to {PROVEN_ELSEWHERE}")


def finding_wanted(markexpr: str) -> bool:
    """Whether the marker expression names the ``finding`` marker."""
    return FINDING_MARKER in markexpr.replace("(", " ").replace(")", " ").split()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not finding_wanted(str(config.getoption("markexpr", "") or "")):
        findings = [i for i in items if i.get_closest_marker(FINDING_MARKER) is not None]
        if findings:
            items[:] = [i for i in items if i.get_closest_marker(FINDING_MARKER) is None]
            config.hook.pytest_deselected(items=findings)
    if not _wants_e2e(config):
        e2e = [item for item in items if item.get_closest_marker(E2E_MARKER) is not None]
        if e2e:
            items[:] = [item for item in items if item.get_closest_marker(E2E_MARKER) is None]
            config.hook.pytest_deselected(items=e2e)
        config.stash[_DESELECTED] = len(e2e)
    elsewhere = config.getoption(PROVEN_ELSEWHERE)
    not_elsewhere = config.getoption(NOT_PROVEN_ELSEWHERE)
    left = [i for i in items if proven_elsewhere(i.nodeid, elsewhere, not_elsewhere)]
    if left:
        items[:] = [i for i in items if not proven_elsewhere(i.nodeid, elsewhere, not_elsewhere)]
        config.hook.pytest_deselected(items=left)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items[:] = longest_first(items, load_durations())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    config = terminalreporter.config
    if hasattr(config, "workerinput") or _wants_e2e(config):
        return
    # Under pytest-xdist the workers deselect, so the controller knows no count.
    count = config.stash.get(_DESELECTED, None)
    if count == 0:
        return
    which = "the end-to-end tests" if count is None else f"{count} end-to-end tests"
    terminalreporter.write_line(
        f"{which} (tests/e2e) were not run, as they bring up a cluster: run them with "
        f"`pytest -m e2e`, or everything with `pytest {WITH_E2E}`"
    )


# -- fixtures ------------------------------------------------------------------------


@pytest.fixture
def short_tmp_path() -> Iterator[Path]:
    """A fresh directory with a short path, for unix sockets: a socket path may not
    exceed 107 bytes, and pytest's ``tmp_path`` grows with the run count, the test's
    name and, under pytest-xdist, the worker (``popen-gw3``)."""
    directory = Path(tempfile.mkdtemp(prefix="t-", dir="/tmp"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def staging(tmp_path: Path) -> Path:
    """A staging_target_path the CO would give (it does not exist yet)."""
    return tmp_path / "staging"


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A target_path: the CO creates its parent, the plugin creates it."""
    (tmp_path / "pods").mkdir()
    return tmp_path / "pods" / "target"


# -- the cluster guard -----------------------------------------------------------------


def no_cluster_reason(item: pytest.Item) -> str | None:
    """Why ``item`` may not touch a real cluster; None for a test of tests/e2e."""
    if item.path.resolve().is_relative_to(E2E_DIR):
        return None
    return f"unit test {item.nodeid} (only the suites in tests/e2e may use a cluster)"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with _guarded(no_cluster_reason(item)):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with _guarded(no_cluster_reason(item)):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, None, None]:
    # After the last test the session's own fixtures end too (the cluster an e2e test
    # brought up is torn down there): that teardown is not the unit test's.
    reason = no_cluster_reason(item) if nextitem is not None else None
    with _guarded(reason):
        return (yield)


@contextlib.contextmanager
def _guarded(reason: str | None) -> Iterator[None]:
    """``NO_CLUSTER_ENV`` set to ``reason`` for the block, then as it was (nothing is
    done when ``reason`` is None): an environment variable, so that commands the test
    starts inherit it."""
    if reason is None:
        yield
        return
    before = os.environ.get(NO_CLUSTER_ENV)
    os.environ[NO_CLUSTER_ENV] = reason
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(NO_CLUSTER_ENV, None)
        else:
            os.environ[NO_CLUSTER_ENV] = before
