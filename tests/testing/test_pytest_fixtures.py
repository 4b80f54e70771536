"""The csi_mock pytest fixture, as a user's test suite sees it (pytester runs a
separate pytest session with the installed plugins)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

USER_TESTS = """
import grpc
import pytest
from csi_mock.proto import csi_pb2 as pb, csi_pb2_grpc as pb_grpc

pytestmark = pytest.mark.csi_mock_config({"node": {"max_volumes_per_node": 5}})

@pytest.fixture
def csi_mock_config():
    return {"pools": [{"name": "module-pool", "size": "2Gi"}]}

def test_the_module_fixture_configures_the_driver(csi_mock):
    assert [p.name for p in csi_mock.admin.pools()] == ["module-pool"]

def test_markers_are_merged_closest_last(csi_mock):
    info = pb_grpc.NodeStub(csi_mock.channel()).NodeGetInfo(pb.NodeGetInfoRequest())
    assert info.max_volumes_per_node == 5

@pytest.mark.csi_mock_config({"node": {"max_volumes_per_node": 7}})
def test_the_tests_own_marker_wins(csi_mock):
    info = pb_grpc.NodeStub(csi_mock.channel()).NodeGetInfo(pb.NodeGetInfoRequest())
    assert info.max_volumes_per_node == 7

@pytest.mark.csi_mock_config("not a mapping")
def test_a_bad_marker_is_a_usage_error(csi_mock):
    pass
"""


def test_the_fixture_runs_a_configured_driver_per_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*csi_mock_config takes one mapping*"])


def test_the_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--markers")
    result.stdout.fnmatch_lines(["*csi_mock_config(config)*"])
