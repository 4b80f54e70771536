"""pytest fixtures that run csi-mock for a unit test, without a cluster.

Loaded automatically once csi-mock is installed (entry point ``pytest11``:
``csi_mock``). Every name starts with ``csi_mock`` so that it cannot clash with
another plugin's::

    import pytest
    from csi_mock.proto import csi_pb2, csi_pb2_grpc

    @pytest.mark.csi_mock_config({"pools": [{"name": "small", "size": "1Gi"}]})
    def test_my_provisioner_reports_a_full_pool(csi_mock):
        controller = csi_pb2_grpc.ControllerStub(csi_mock.channel())
        ...

``csi_mock_config`` is also a fixture: override it in a conftest.py or a module to
configure every driver there. The marker's configuration is merged over it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from csi_mock.testing import RunningCsiMock, merge_config, running_csi_mock

MARKER = "csi_mock_config"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(config): csi-mock configuration for this test's csi_mock fixture"
        " (deep-merged over the csi_mock_config fixture)",
    )


@pytest.fixture
def csi_mock_config() -> Mapping[str, Any]:
    """The configuration of the ``csi_mock`` fixture's driver; override to change it."""
    return {}


@pytest.fixture
def csi_mock(
    request: pytest.FixtureRequest, csi_mock_config: Mapping[str, Any]
) -> Iterator[RunningCsiMock]:
    """A running csi-mock (controller and node on one socket), stopped after the test."""
    layers: list[Mapping[str, Any]] = [csi_mock_config]
    for marker in reversed(list(request.node.iter_markers(MARKER))):
        if len(marker.args) != 1 or not isinstance(marker.args[0], Mapping) or marker.kwargs:
            raise pytest.UsageError(
                f"@pytest.mark.{MARKER} takes one mapping (csi-mock's configuration),"
                f" got args={marker.args!r} kwargs={marker.kwargs!r}"
            )
        layers.append(marker.args[0])
    with running_csi_mock(merge_config(*layers)) as mock:
        yield mock
