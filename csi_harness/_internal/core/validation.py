"""A pydantic ``ValidationError`` as a message that names the source and each bad key."""

from __future__ import annotations

from pydantic import ValidationError


def describe_validation_error(
    error: ValidationError, source: str, what: str = "cluster configuration"
) -> str:
    """``<source>: invalid <what>``, then a line per problem: ``  key.path: message``."""
    lines = [f"{source}: invalid {what}"]
    for problem in error.errors():
        location = ".".join(str(p) for p in problem["loc"])
        lines.append(f"  {location}: {problem['msg']}" if location else f"  {problem['msg']}")
    return "\n".join(lines)
