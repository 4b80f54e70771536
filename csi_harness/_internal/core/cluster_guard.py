"""A guard that stops code from bringing up, tearing down or entering a real cluster
where none may be touched: unit tests.

A test runner sets ``NO_CLUSTER_ENV`` around the tests that must not touch a
cluster, to a sentence saying which test that is and why it may not; ``refuse_cluster`` then raises
``ClusterRefused`` before anything is started or removed. It is an environment
variable, not a flag in this process, so that a ``csi-harness`` command or a pytest
session a test starts as a subprocess is held by it too. A cluster's own code calls
``refuse_cluster`` at the points that change a real cluster (bring-up, tear-down) and
the provider at entering, so a unit test that reaches one of them by mistake (through
a fixture, or a patched function that did not take) fails at once, naming itself,
instead of bringing up a cluster or removing a running one of the same name.
"""

from __future__ import annotations

import os

NO_CLUSTER_ENV = "CSI_HARNESS_NO_CLUSTER"


class ClusterRefused(RuntimeError):
    """A cluster was about to be brought up, torn down or used under the guard."""


def refuse_cluster(action: str) -> None:
    """Raise ``ClusterRefused`` naming ``action`` (e.g. "bring up local cluster 'x'")
    when ``NO_CLUSTER_ENV`` is set; do nothing otherwise."""
    holder = os.environ.get(NO_CLUSTER_ENV)
    if holder:
        raise ClusterRefused(f"refused to {action}: {holder} ({NO_CLUSTER_ENV} is set)")
