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


def status_of(error: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status code and message a failed call reports for `error`."""
    if isinstance(error, errors.InjectedFault) and isinstance(error.code, grpc.StatusCode):
        return error.code, str(error)
    for kind in type(error).__mro__:
        code = STATUS_OF_ERROR.get(kind)
        if code is not None:
            return code, str(error)
    if isinstance(error, OSError):
        return grpc.StatusCode.INTERNAL, f"host operation failed: {error}"
    return grpc.StatusCode.INTERNAL, f"internal error: {type(error).__name__}: {error}"
