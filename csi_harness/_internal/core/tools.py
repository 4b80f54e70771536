"""Finding the pinned binaries built by ``tools/build.sh`` (``csi-harness tools``;
docs/toolchain.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from csi_harness._internal.core.commands import CommandFailed, Runner, run_command
from csi_harness._internal.core.package_data import TOOLS_SCRIPT

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
        """The bin dir given, else $CSI_MOCK_TOOLS_BIN, else what ``tools/build.sh path`` says."""
        if bin_dir is None and os.environ.get("CSI_MOCK_TOOLS_BIN"):
            bin_dir = Path(os.environ["CSI_MOCK_TOOLS_BIN"])
        if bin_dir is None:
            if not TOOLS_SCRIPT.exists():
                raise ToolsMissing(f"no tools bin dir given and {TOOLS_SCRIPT} is missing")
            try:
                bin_dir = Path(run_command(["bash", str(TOOLS_SCRIPT), "path"]).strip())
            except CommandFailed as exc:
                raise ToolsMissing(f"{TOOLS_SCRIPT} path failed: {exc}") from exc
        missing = [name for name in REQUIRED if not (bin_dir / name).exists()]
        if missing:
            raise ToolsMissing(
                f"missing in {bin_dir}: {', '.join(missing)}; build them with "
                "`csi-harness tools build kubernetes etcd containerd runc cni-plugins "
                "csi-provisioner csi-attacher csi-resizer csi-snapshotter`"
            )
        return cls(bin_dir)

    def snapshot_crds(self) -> Path:
        """external-snapshotter's CRDs, built with its binaries (tools/csi-snapshotter's
        DATA: the crd directory next to them)."""
        return Path(self["snapshot-controller"]).resolve().parent / "crd"


def tool_path(name: str, runner: Runner = run_command) -> str:
    """The pinned binary ``name`` as ``tools/build.sh path`` reports it (built and cached
    by ``csi-harness tools build`` or ``make tools``); ToolsMissing when it cannot say."""
    try:
        path = runner(["bash", str(TOOLS_SCRIPT), "path", name]).strip()
    except CommandFailed as exc:
        raise ToolsMissing(f"cannot locate {name}: {exc}") from exc
    if not path:
        raise ToolsMissing(f"{TOOLS_SCRIPT} path {name} printed nothing")
    return path


def tool_binary(name: str) -> Path | None:
    """The pinned binary ``name`` as ``tools/build.sh path NAME`` reports it; None when it
    is not built (or the script does not know it)."""
    try:
        path = Path(tool_path(name))
    except ToolsMissing:
        return None
    return path if path.is_file() else None
