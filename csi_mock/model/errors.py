"""Domain errors. The service layer maps each one to a CSI status code in one table."""


class DomainError(Exception):
    """Base of every error the driver reports to its caller."""


class InvalidArgument(DomainError):
    """A required field is missing or malformed."""


class NotFound(DomainError):
    """The named volume, node, path or token does not exist."""


class AlreadyExistsIncompatible(DomainError):
    """An object of that name exists but the repeated request does not match it."""


class CapacityExhausted(DomainError):
    """No allowed pool has room, or a node reached its attach limit."""


class OutOfRange(DomainError):
    """The requested capacity range cannot be served by any allowed pool."""


class FailedPrecondition(DomainError):
    """The request is valid but the volume is in the wrong state for it."""


class Unimplemented(DomainError):
    """The operation is switched off by configuration."""


class Aborted(DomainError):
    """A pagination token is not one this driver handed out."""


class Unavailable(DomainError):
    """The driver is not ready yet (state still loading)."""


class InjectedFault(DomainError):
    """A fault rule's error: carries the status code the rule names."""

    def __init__(self, code: object, message: str) -> None:
        super().__init__(message)
        self.code = code
