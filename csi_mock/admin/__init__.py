"""The admin API: control a running driver over HTTP/JSON.

The server side (`csi_mock.admin.server.AdminServer`) runs inside `csi-mock serve`;
this package's public surface is the client a test harness uses.

The names below are imported when first used (PEP 562): `csi-mock serve` imports the
server's modules from this package, and the client's httpx would add about a tenth of
a second of CPU to every driver start (benchmarks/bench_serve_start.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from csi_mock.lazy_names import lazy_names

if TYPE_CHECKING:  # what __getattr__ below imports on first use
    from csi_mock.admin.client import AdminClient as AdminClient
    from csi_mock.admin.client import AdminConnectionError as AdminConnectionError
    from csi_mock.admin.client import AdminError as AdminError
    from csi_mock.admin.client import AsyncAdminClient as AsyncAdminClient
    from csi_mock.admin.client import FaultSpec as FaultSpec
    from csi_mock.admin.client import FieldProblem as FieldProblem
    from csi_mock.admin.client import JournalFilter as JournalFilter
    from csi_mock.admin.views import TOKEN_HEADER as TOKEN_HEADER
    from csi_mock.admin.views import AttachmentView as AttachmentView
    from csi_mock.admin.views import ErrorView as ErrorView
    from csi_mock.admin.views import FaultRuleView as FaultRuleView
    from csi_mock.admin.views import Health as Health
    from csi_mock.admin.views import Limits as Limits
    from csi_mock.admin.views import PoolView as PoolView
    from csi_mock.admin.views import RegistrationView as RegistrationView
    from csi_mock.admin.views import RescueView as RescueView
    from csi_mock.admin.views import SnapshotPage as SnapshotPage
    from csi_mock.admin.views import SnapshotView as SnapshotView
    from csi_mock.admin.views import VolumePage as VolumePage
    from csi_mock.admin.views import VolumeView as VolumeView

_CLIENT = (
    "AdminClient",
    "AdminConnectionError",
    "AdminError",
    "AsyncAdminClient",
    "FaultSpec",
    "FieldProblem",
    "JournalFilter",
)
_VIEWS = (
    "TOKEN_HEADER",
    "AttachmentView",
    "ErrorView",
    "FaultRuleView",
    "Health",
    "Limits",
    "PoolView",
    "RegistrationView",
    "RescueView",
    "SnapshotPage",
    "SnapshotView",
    "VolumePage",
    "VolumeView",
)
_HOME = {
    **dict.fromkeys(_CLIENT, "csi_mock.admin.client"),
    **dict.fromkeys(_VIEWS, "csi_mock.admin.views"),
}

__all__ = sorted(_HOME)


__getattr__, __dir__ = lazy_names(__name__, _HOME)
