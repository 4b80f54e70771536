"""Finding the pinned binaries built by ``scripts/tools.sh`` (docs/toolchain.md)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from csi_harness._internal.core.resources import TOOLS_SCRIPT

REQUIRED = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "runc",
    "bridge",
    "host-local",
    "loopback",
    "csi-provisioner",
    "csi-attacher",
    "csi-resizer",
    "csi-snapshotter",
    "snapshot-controller",
)


class ToolsMissing(RuntimeError):
    pass


@dataclass(frozen=True)
class Tools:
    bin_dir: Path

    def __getitem__(self, name: str) -> str:
        return str(self.bin_dir / name)

    @classmethod
    def locate(cls, bin_dir: Path | None = None) -> Tools:
        """The bin dir given, else $CSI_MOCK_TOOLS_BIN, else what ``tools.sh path`` says."""
        if bin_dir is None and os.environ.get("CSI_MOCK_TOOLS_BIN"):
            bin_dir = Path(os.environ["CSI_MOCK_TOOLS_BIN"])
        if bin_dir is None:
            if not TOOLS_SCRIPT.exists():
                raise ToolsMissing("no tools bin dir given and scripts/tools.sh not found")
            out = subprocess.run(
                ["bash", str(TOOLS_SCRIPT), "path"], capture_output=True, text=True, check=False
            )
            if out.returncode != 0:
                raise ToolsMissing(f"scripts/tools.sh path failed: {out.stderr.strip()}")
            bin_dir = Path(out.stdout.strip())
        missing = [name for name in REQUIRED if not (bin_dir / name).exists()]
        if missing:
            raise ToolsMissing(
                f"missing in {bin_dir}: {', '.join(missing)}; build them with "
                '`make tools TOOLS="kubernetes etcd containerd runc cni-plugins '
                'csi-provisioner csi-attacher csi-resizer csi-snapshotter"`'
            )
        return cls(bin_dir)

    def snapshot_crds(self) -> Path:
        """external-snapshotter's CRDs, built with its binaries (tools/csi-snapshotter's
        DATA: the crd directory next to them)."""
        return Path(self["snapshot-controller"]).resolve().parent / "crd"


def tool_binary(name: str) -> Path | None:
    """The pinned binary ``name`` as ``tools.sh path NAME`` reports it; None when it is
    not built (or tools.sh does not know it)."""
    out = subprocess.run(
        ["bash", str(TOOLS_SCRIPT), "path", name], capture_output=True, text=True, check=False
    )
    path = Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None
    return path if path is not None and path.is_file() else None
