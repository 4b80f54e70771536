"""The call interceptor publishes a refused call's record before the status goes out
(grpc.aio's context.abort() sends it at once): a caller that reads the journal as soon
as it has its answer must find the call there."""

from __future__ import annotations

from typing import Any, cast

import grpc
import pytest

from csi_mock.model.errors import CapacityExhausted
from csi_mock.observe.calls import CallRecord
from csi_mock.proto import csi_pb2 as pb
from csi_mock.services.interceptor import CallInterceptor
from csi_mock.services.readiness import Readiness


class CallDetails(grpc.HandlerCallDetails):
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


class AbortingContext:
    """Stands in for grpc.aio.ServicerContext: notes what the sink held at abort()."""

    def __init__(self, published: list[CallRecord]) -> None:
        self.published = published
        self.seen_at_abort: list[str] | None = None

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.seen_at_abort = [record.code for record in self.published]
        raise grpc.aio.AbortError(code, details)

    def time_remaining(self) -> float | None:
        return None


async def refuse(request: Any, context: Any) -> Any:
    raise CapacityExhausted("pool small has no room")


async def test_a_refused_call_is_published_before_its_status_is_sent() -> None:
    published: list[CallRecord] = []
    readiness = Readiness()
    readiness.ready = True
    interceptor = CallInterceptor(readiness, [published.append])
    handler = grpc.unary_unary_rpc_method_handler(refuse)

    async def continuation(details: Any) -> Any:
        return handler

    details = CallDetails("/csi.v1.Controller/CreateVolume")
    wrapped = await interceptor.intercept_service(continuation, details)
    assert wrapped.unary_unary is not None
    context = AbortingContext(published)

    request = pb.CreateVolumeRequest(name="v1")
    with pytest.raises(grpc.aio.AbortError):
        await wrapped.unary_unary(request, cast(Any, context))

    assert context.seen_at_abort == ["RESOURCE_EXHAUSTED"]
    assert [record.code for record in published] == ["RESOURCE_EXHAUSTED"], "published once"
