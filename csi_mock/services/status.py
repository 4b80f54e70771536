"""Domain errors to CSI status codes, in one table."""

from __future__ import annotations

import grpc

from csi_mock.model import errors

STATUS_OF_ERROR: dict[type[errors.DomainError], grpc.StatusCode] = {
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.AlreadyExistsIncompatible: grpc.StatusCode.ALREADY_EXISTS,
    errors.CapacityExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.OutOfRange: grpc.StatusCode.OUT_OF_RANGE,
    errors.FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    errors.Unimplemented: grpc.StatusCode.UNIMPLEMENTED,
    errors.Aborted: grpc.StatusCode.ABORTED,
    errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
}


MAX_MESSAGE_BYTES = 1024
"""Status messages are cut to this many UTF-8 bytes. gRPC sends the message
percent-encoded in a trailer, and a trailer above 16 KiB makes the client drop the
call's status for RESOURCE_EXHAUSTED "Stream removed": a message quoting a huge request
field would otherwise hide the real code."""


def status_of(error: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status code and message a failed call reports for `error`."""
    code, message = _status_of(error)
    return code, bounded(message)


def _status_of(error: BaseException) -> tuple[grpc.StatusCode, str]:
    if isinstance(error, errors.InjectedFault) and isinstance(error.code, grpc.StatusCode):
        return error.code, str(error)
    for kind in type(error).__mro__:
        code = STATUS_OF_ERROR.get(kind)
        if code is not None:
            return code, str(error)
    if isinstance(error, OSError):
        return grpc.StatusCode.INTERNAL, f"host operation failed: {error}"
    return grpc.StatusCode.INTERNAL, f"internal error: {type(error).__name__}: {error}"


def bounded(message: str, limit: int = MAX_MESSAGE_BYTES) -> str:
    """`message`, cut to at most `limit` UTF-8 bytes with a note of how much was cut."""
    encoded = message.encode()
    if len(encoded) <= limit:
        return message
    kept = encoded[: limit - 40].decode(errors="ignore")
    return f"{kept}... ({len(message) - len(kept)} more characters)"
