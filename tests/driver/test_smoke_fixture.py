from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver


async def test_probe_reports_ready_once_state_is_loaded(csi: RunningDriver) -> None:
    response = await csi.identity.Probe(pb.ProbeRequest())
    assert response.ready.value is True
