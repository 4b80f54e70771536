"""The one interceptor around every CSI service.

It refuses volume RPCs until state is loaded, turns domain errors into status codes,
times each call and hands a CallRecord to every sink (JSON log, journal, metrics).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import grpc

from csi_mock.model.errors import Unavailable
from csi_mock.observe.calls import CallRecord, RecordSink, key_fields, split_method
from csi_mock.services.readiness import Readiness
from csi_mock.services.status import status_of

if TYPE_CHECKING:
    Handler = grpc.RpcMethodHandler[Any, Any]
Behaviour = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[Any]]


class CallInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    def __init__(self, readiness: Readiness, sinks: Sequence[RecordSink]) -> None:
        self._readiness = readiness
        self._sinks = list(sinks)

    def add_sink(self, sink: RecordSink) -> None:
        self._sinks.append(sink)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        service, method = split_method(handler_call_details.method)
        behaviour: Behaviour = handler.unary_unary  # type: ignore[assignment]

        async def observed(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            record = CallRecord(
                time=time.time(), method=method, service=service, request=key_fields(request)
            )
            started = time.perf_counter()
            try:
                if service != "Identity" and not self._readiness.ready:
                    raise Unavailable(self._readiness.failure or "driver state is still loading")
                return await behaviour(request, context)
            except Exception as error:
                if isinstance(error, grpc.aio.AbortError):
                    record.code = context.code().name if context.code() else "UNKNOWN"
                    raise
                code, message = status_of(error)
                record.code, record.message = code.name, message
                await context.abort(code, message)
            finally:
                record.duration_ms = round((time.perf_counter() - started) * 1000, 3)
                for sink in self._sinks:
                    sink(record)

        return grpc.unary_unary_rpc_method_handler(
            observed,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
