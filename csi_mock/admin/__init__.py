"""The admin API: control a running driver over HTTP/JSON.

The server side (`csi_mock.admin.server.AdminServer`) runs inside `csi-mock serve`;
this package's public surface is the client a test harness uses.
"""

from csi_mock.admin.client import (
    AdminClient,
    AdminConnectionError,
    AdminError,
    AsyncAdminClient,
    FaultSpec,
    FieldProblem,
    JournalFilter,
)
from csi_mock.admin.views import (
    TOKEN_HEADER,
    AttachmentView,
    ErrorView,
    FaultRuleView,
    Health,
    Limits,
    PoolView,
    RegistrationView,
    RescueView,
    SnapshotPage,
    SnapshotView,
    VolumePage,
    VolumeView,
)

__all__ = [
    "TOKEN_HEADER",
    "AdminClient",
    "AdminConnectionError",
    "AdminError",
    "AsyncAdminClient",
    "AttachmentView",
    "ErrorView",
    "FaultRuleView",
    "FaultSpec",
    "FieldProblem",
    "Health",
    "JournalFilter",
    "Limits",
    "PoolView",
    "RegistrationView",
    "RescueView",
    "SnapshotPage",
    "SnapshotView",
    "VolumePage",
    "VolumeView",
]
