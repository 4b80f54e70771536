"""What the cluster and the driver looked like when a test failed.

``collect(target)`` gathers, each part on its own so that one broken source (an
apiserver that is down, a driver that hangs) costs only its own part:

* the events of the test's namespace and of the driver's, oldest first;
* the pods and claims of the test's namespace, every PV, VolumeAttachment, CSINode
  and CSIDriver, and the driver's CSIStorageCapacity objects: one line each for
  reading, the YAML for the files;
* the driver's call journal, controller and every node instance, one line a call;
* the last lines of every component's log: every process's where the cluster keeps
  them in a directory (the local provider), else the driver's components'.

``cluster_target(cluster)`` says where to look in a
``csi_harness._internal.providers.base.Cluster``. The
result holds short ``Section``s (what a terminal can show) and the full texts as
files; ``write`` puts the files in a directory. Nothing here knows about pytest.

The modules: ``sources`` (where to look), ``listing`` (the objects, as plain data),
``formatting`` (events, journal records and log lines, one line each), ``failsafe``
(a broken source costs only its own part) and ``collect``; the objects' one-line
descriptions are ``csi_harness._internal.kube.describe``'s.
"""

from csi_harness._internal.diagnostics.collect import Diagnostics, Limits, Section, collect, write
from csi_harness._internal.diagnostics.failsafe import Skipped, describe_error, safely
from csi_harness._internal.diagnostics.formatting import (
    LOG_ORDER,
    ROUTINE_METHODS,
    clip,
    event_time,
    format_event,
    format_record,
    is_routine,
    is_routine_log_line,
    last,
    log_rank,
    sorted_events,
)
from csi_harness._internal.diagnostics.listing import (
    EVENTS,
    OBJECT_KINDS,
    KubeLister,
    ObjectKind,
    connect_kube,
    plain_resource,
)
from csi_harness._internal.diagnostics.sources import (
    ClusterTarget,
    ComponentLogs,
    DriverLogs,
    JournalSource,
    LogDirectory,
    cluster_target,
    read_tail,
)

__all__ = [
    "EVENTS",
    "LOG_ORDER",
    "OBJECT_KINDS",
    "ROUTINE_METHODS",
    "ClusterTarget",
    "ComponentLogs",
    "Diagnostics",
    "DriverLogs",
    "JournalSource",
    "KubeLister",
    "Limits",
    "LogDirectory",
    "ObjectKind",
    "Section",
    "Skipped",
    "clip",
    "cluster_target",
    "collect",
    "connect_kube",
    "describe_error",
    "event_time",
    "format_event",
    "format_record",
    "is_routine",
    "is_routine_log_line",
    "last",
    "log_rank",
    "plain_resource",
    "read_tail",
    "safely",
    "sorted_events",
    "write",
]
