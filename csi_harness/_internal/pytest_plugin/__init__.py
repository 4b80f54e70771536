"""pytest plugin of the csi-mock conformance harness (registered as ``csi_harness``).

Options (all prefixed ``--csi-``: pytest-kind, for one, has ``--cluster-name`` and
``--keep-cluster``, and two plugins defining an option stop pytest):
  --csi-cluster local      bring up a local cluster for the session (default)
  --csi-cluster kind       create a kind cluster for the session (offline node image
                           unless --csi-node-image), deploy csi-mock in it, delete it after
  --csi-cluster existing   use a running cluster: a csi-harness local cluster (found by
                           --csi-kubeconfig, else by --csi-cluster-name), or any cluster
                           whose --csi-kubeconfig is given, with csi-mock deployed
                           in-cluster; it is left running
  --csi-kubeconfig PATH    the existing cluster's kubeconfig
  --csi-keep-cluster       leave the local or kind cluster running after the session
                           (kind: and reuse a running one of that name)
  --csi-cluster-name NAME  name of the local or kind cluster; default csi-harness-e2e,
                           or csi-harness-e2e-N while other sessions on this host bring
                           up theirs (a session never shares another's cluster)
  --csi-kind-config FILE   kind configuration (default kind-config/two-nodes.yaml)
  --csi-node-image IMAGE   kind node image of your own (e.g. from your Kubernetes branch)
  --csi-feature-gates G=B,...  Kubernetes feature gates for every component (local only)

Running tests at the same time (pytest-xdist, ``-n N``): the first worker whose
tests need the cluster brings it up, the others attach to it, and the controller
tears it down after they all end. Each test's driver gets a name, StorageClasses, namespace
and topology keys of its own (``Cluster.concurrent_drivers``: the local provider), so
tests do not see each other's. A test marked ``cluster_wide`` (it restarts the
scheduler, say) runs while no other test runs (``csi_harness._internal.core.cluster_lock``).

Fixtures:
  ``cluster`` (session)        the running cluster, a
  ``csi_harness._internal.providers.base.Cluster`` whichever
                               provider ``--csi-cluster`` chose
  ``kube`` (session)           a lightkube Client for it
  ``driver`` (function)        the driver, deployed fresh for the test from the
                               ``@pytest.mark.driver(**DriverDeployment fields)`` marker,
                               with a name and suffix of its own where the cluster allows
                               drivers side by side; removed after the test
  ``namespace`` (function)     the test's own namespace; its pods and claims are deleted,
                               and their volumes with them, before the driver goes
  ``admin`` (function)         the csi-mock controller's admin client
  ``required_feature_gates``   (autouse) skips a test marked ``feature_gate(name,
                               component=...)`` unless the cluster runs the gate on
"""

from csi_harness._internal.pytest_plugin.fixtures import (
    admin,
    cluster,
    cluster_access,
    driver,
    driver_pool,
    kube,
    namespace,
    required_feature_gates,
)
from csi_harness._internal.pytest_plugin.options import pytest_addoption
from csi_harness._internal.pytest_plugin.session import (
    pytest_configure,
    pytest_configure_node,
    pytest_unconfigure,
)

__all__ = [
    "admin",
    "cluster",
    "cluster_access",
    "driver",
    "driver_pool",
    "kube",
    "namespace",
    "pytest_addoption",
    "pytest_configure",
    "pytest_configure_node",
    "pytest_unconfigure",
    "required_feature_gates",
]
