"""``python -m csi_mock`` runs the csi-mock CLI."""

import sys

from csi_mock.cli import main

sys.exit(main())
