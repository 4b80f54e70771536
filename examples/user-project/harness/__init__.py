"""This project's own helpers. ``harness`` is a common name for such a package, and
csi-mock's wheel installs nothing under it (its harness is ``csi_harness``), so
``python -m pytest`` here imports this one."""

POOL_SIZE = "2Gi"
"""Every node's pool in this project's capacity tests."""
LARGER_THAN_A_POOL = "3Gi"
FITS_A_POOL = "1Gi"
