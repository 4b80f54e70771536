"""A CSI method csi-mock's CSI v1.13 proto does not have (one a later CSI version would
add; NodeGetVolumeFuture stands for it): the caller gets UNIMPLEMENTED, as from any gRPC
server, and the journal records the call, so a test can tell whether a caller tried it."""

from __future__ import annotations

import grpc
import pytest

from csi_mock.control.journal import JournalQuery
from tests.driver.conftest import RunningDriver


async def call_raw(csi: RunningDriver, full_method: str) -> None:
    call = csi.channel.unary_unary(
        full_method, request_serializer=lambda b: b, response_deserializer=lambda b: b
    )
    await call(b"")


async def test_an_unknown_csi_method_is_unimplemented_and_journaled(csi: RunningDriver) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call_raw(csi, "/csi.v1.Node/NodeGetVolumeFuture")

    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "NodeGetVolumeFuture" in (raised.value.details() or "")
    (record,) = csi.driver.journal.query(JournalQuery(method="NodeGetVolumeFuture"))
    assert (record.service, record.code) == ("Node", "UNIMPLEMENTED")


async def test_an_unknown_path_outside_csi_is_not_journaled(csi: RunningDriver) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call_raw(csi, "/other.v1.Service/Method")

    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert csi.driver.journal.query(JournalQuery(method="Method")) == []
