"""The old name of ``kube/waits/csistoragecapacity.py``, kept only for
``pytest_plugin/pooled_drivers.py``, which another change is editing; delete this file
once that module imports ``DRIVER_NAME_LABEL`` from
``csi_harness._internal.kube.waits.csistoragecapacity`` (issue 45, item 2)."""

from csi_harness._internal.kube.waits.csistoragecapacity import DRIVER_NAME_LABEL

__all__ = ["DRIVER_NAME_LABEL"]
