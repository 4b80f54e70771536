"""The old name of ``kube/csinode.py``, kept only for ``pytest_plugin/pooled_drivers.py``,
which another change is editing; delete this file once that module imports
``csi_harness._internal.kube.csinode`` (issue 45, item 2)."""

from csi_harness._internal.kube.csinode import CSINodeResource, csinode_drivers

__all__ = ["CSINodeResource", "csinode_drivers"]
