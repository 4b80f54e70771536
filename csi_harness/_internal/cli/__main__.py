"""``python -m csi_harness._internal.cli``: the same as ``csi-harness``."""

import sys

from csi_harness._internal.cli import main

sys.exit(main())
