"""The one interceptor around every CSI service.

It refuses volume RPCs until state is loaded and requests that do not decode (a string
that is not UTF-8: INVALID_ARGUMENT naming the field), turns domain errors into status codes,
times each call and hands a CallRecord to every sink (JSON log, journal, metrics).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import grpc

from csi_mock.control.faults import FaultEngine
from csi_mock.fault_rules import FaultRuleSpec
from csi_mock.model.errors import InjectedFault, Unavailable
from csi_mock.observe.calls import CallRecord, RecordSink, key_fields, split_method
from csi_mock.observe.whole_messages import WholeMessages
from csi_mock.services.decoding import UndecodableRequest, lenient
from csi_mock.services.fault_replies import (
    apply_overrides,
    reply_of,
    request_fields,
    response_class,
)
from csi_mock.services.readiness import Readiness
from csi_mock.services.status import status_of

HANG_WITHOUT_DEADLINE = 3600.0
CSI_PREFIX = "/csi.v1."
"""Full method names of the CSI services; other unknown paths stay gRPC's own."""

if TYPE_CHECKING:
    Handler = grpc.RpcMethodHandler[Any, Any]
Behaviour = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[Any]]


class CallInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    def __init__(
        self,
        readiness: Readiness,
        sinks: Sequence[RecordSink],
        faults: FaultEngine | None = None,
        whole: WholeMessages | None = None,
    ) -> None:
        self._readiness = readiness
        self._sinks = list(sinks)
        self._faults = faults
        self._whole = whole
        """Set: every record also carries the whole request and reply, secrets hashed."""
        # Each method's handler is static, so its wrapper is built once, not per call.
        self._wrapped: dict[str, tuple[Handler, Handler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(handler_call_details)
        if handler is None and handler_call_details.method.startswith(CSI_PREFIX):
            return self._unimplemented(handler_call_details.method)
        if handler is None or handler.unary_unary is None:
            return handler
        cached = self._wrapped.get(handler_call_details.method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self._wrap(handler, handler_call_details.method)
        self._wrapped[handler_call_details.method] = (handler, wrapped)
        return wrapped

    def _unimplemented(self, full_method: str) -> Handler:
        """A CSI method this proto does not have (one a CSI version after v1.13 adds,
        or a misspelt one): UNIMPLEMENTED, as gRPC answers it, but journaled, so a
        test can see that a caller tried it."""
        cached = self._wrapped.get(full_method)
        if cached is not None:
            return cached[1]
        service, method = split_method(full_method)
        message = f"{method} is not a method of the CSI version csi-mock implements (v1.13)"

        async def refuse(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> None:
            record = CallRecord(
                time=time.time(),
                method=method,
                service=service,
                code=grpc.StatusCode.UNIMPLEMENTED.name,
                message=message,
            )
            for sink in self._sinks:
                sink(record)
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, message)

        handler = grpc.unary_unary_rpc_method_handler(refuse)
        self._wrapped[full_method] = (handler, handler)
        return handler

    def _wrap(self, handler: Handler, full_method: str) -> Handler:
        service, method = split_method(full_method)
        behaviour: Behaviour = handler.unary_unary  # type: ignore[assignment]
        reply_class = response_class(full_method)  # a rescue's reply

        async def observed(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            undecodable = isinstance(request, UndecodableRequest)
            record = CallRecord(
                time=time.time(),
                method=method,
                service=service,
                request={} if undecodable else key_fields(request),
            )
            started = time.perf_counter()
            published = False
            response: Any = None

            def publish() -> None:
                nonlocal published
                published = True
                record.duration_ms = round((time.perf_counter() - started) * 1000, 3)
                if self._whole is not None and not undecodable:
                    record.whole_request = self._whole.to_dict(request)
                    if record.code == "OK" and response is not None:
                        record.whole_reply = self._whole.to_dict(response)
                for sink in self._sinks:
                    sink(record)

            try:
                if undecodable:
                    raise request.error
                if service != "Identity" and not self._readiness.ready:
                    raise Unavailable(self._readiness.failure or "driver state is still loading")
                rule = (
                    self._faults.select(method, record.request, lambda: request_fields(request))
                    if self._faults
                    else None
                )
                if rule is None:
                    response = await behaviour(request, context)
                    return response
                record.fault = rule.id
                await apply_before(rule.spec, context)
                try:
                    response = await behaviour(request, context)
                except Exception as error:
                    rescue = rule.spec.rescue
                    if rescue is None or reply_class is None:
                        raise
                    if isinstance(error, grpc.aio.AbortError):
                        raise  # the handler has sent its status already
                    code, message = status_of(error)
                    if rescue.code is not None and code.name != rescue.code:
                        raise
                    response = reply_of(reply_class, rescue.reply)
                    record.message = f"rescued {code.name}: {message}"
                if rule.rewrites:
                    apply_overrides(response, rule.rewrites)
                return response
            except asyncio.CancelledError:
                # gRPC cancels the handler when the caller's deadline passes (a hang ends
                # here) or the caller goes away: record what the caller saw, not OK.
                remaining = context.time_remaining()
                expired = remaining is not None and remaining <= 0
                record.code = "DEADLINE_EXCEEDED" if expired else "CANCELLED"
                record.message = "deadline exceeded" if expired else "cancelled by the caller"
                raise
            except Exception as error:
                if isinstance(error, grpc.aio.AbortError):
                    record.code = context.code().name if context.code() else "UNKNOWN"
                    raise
                code, message = status_of(error)
                record.code, record.message = code.name, message
                # context.abort() sends the status at once: publish first, so that a
                # caller reading the journal as soon as it has its answer finds the call.
                publish()
                await context.abort(code, message)
            finally:
                if not published:
                    publish()

        return grpc.unary_unary_rpc_method_handler(
            observed,
            # Bytes that are not a valid request (a string that is not UTF-8) reach
            # `observed` as an UndecodableRequest, refused as INVALID_ARGUMENT.
            request_deserializer=lenient(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )


async def apply_before(spec: FaultRuleSpec, context: grpc.aio.ServicerContext[Any, Any]) -> None:
    """Delay, hang or fail before the real handler runs."""
    if spec.delay:
        await asyncio.sleep(spec.delay)
    if spec.hang:
        remaining = context.time_remaining()
        # Past the caller's deadline gRPC cancels this task; without one, hang a long time.
        await asyncio.sleep(remaining + 1 if remaining is not None else HANG_WITHOUT_DEADLINE)
        raise InjectedFault(grpc.StatusCode.DEADLINE_EXCEEDED, "injected hang ended")
    if spec.error is not None:
        raise InjectedFault(grpc.StatusCode[spec.error.code], spec.error.message)
