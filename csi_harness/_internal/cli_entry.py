"""The ``csi-harness`` console script: the harness's command line, when it can load.

``csi-harness`` is installed with csi-mock whether or not the ``harness`` extra is
(pip cannot make a console script depend on an extra). Without the extra the command
line cannot even be imported; this says so in one line naming the extra, instead of a
traceback ending in ``No module named 'lightkube'``.
"""

from __future__ import annotations

import sys

HARNESS_EXTRA = "pip install 'csi-mock[harness]'"
HARNESS_PACKAGES = ("lightkube", "cryptography")
"""What the ``harness`` extra brings that the command line imports."""


def main() -> int:
    try:
        from csi_harness._internal.cli import main as harness_main
    except ModuleNotFoundError as missing:
        package = (missing.name or "").partition(".")[0]
        if package not in HARNESS_PACKAGES:
            raise
        print(
            f"csi-harness: {package} is missing; it comes with the harness extra: {HARNESS_EXTRA}",
            file=sys.stderr,
        )
        return 1
    return harness_main()
