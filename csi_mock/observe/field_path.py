"""Field paths into a recorded request or reply: `csi_mock.model.field_path`, named here
too because the journal's `where=PATH=GLOB` is where they started.

The parser lives in the model layer so that fault rules (`csi_mock.fault_rules`), which
configuration validates, can name request and reply fields with the same paths.
"""

from csi_mock.model.field_path import (
    MAX_PATH_LENGTH,
    FieldCondition,
    FieldPath,
    FieldPathError,
    Step,
    parse_condition,
    parse_path,
    parse_path_prefix,
)

__all__ = [
    "MAX_PATH_LENGTH",
    "FieldCondition",
    "FieldPath",
    "FieldPathError",
    "Step",
    "parse_condition",
    "parse_path",
    "parse_path_prefix",
]
