"""The ``csi_harness`` pytest entry point: the harness plugin, when it can load.

csi-mock's distribution registers this module for every pytest run in an environment
where it is installed. The harness needs its extra (``pip install 'csi-mock[harness]'``:
a Kubernetes client and the local cluster's PKI); in a driver-only install those are
absent, and importing the plugin would stop every pytest run there, the user's own
included. So the plugin is loaded only when its dependencies are importable, and a
driver-only install keeps just the unit-test fixtures of ``csi_mock.pytest_fixtures``.
"""

from __future__ import annotations

import importlib

HARNESS_DEPENDENCIES = ("lightkube", "cryptography")


def _missing() -> list[str]:
    missing = []
    for name in HARNESS_DEPENDENCIES:
        try:
            importlib.import_module(name)  # the plugin imports them anyway
        except ImportError:
            missing.append(name)
    return missing


MISSING = _missing()

# pytest imports the plugins a plugin module lists here (PluginManager.consider_module).
pytest_plugins = [] if MISSING else ["csi_harness._internal.pytest_plugin"]
