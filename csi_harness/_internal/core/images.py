"""Container images for the local cluster, built here because no registry is reachable,
and their import into containerd.

The recipes, each a one-layer archive (``core/image_archive.py``: ``docker save``
format, deterministic, cached by a key over every input):

* the pause image (``registry.k8s.io/pause:3.10``), a static binary compiled from
  ``pause.c`` next to this module;
* a busybox image (``csi-mock.local/busybox:1``) from Debian's static busybox;
* Kubernetes' agnhost over the busybox layer, and busybox with some of the host's GNU
  programs (for upstream's e2e suites).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path

from csi_harness._internal.core.commands import CommandFailed, run_command
from csi_harness._internal.core.image_archive import (
    ImageBuildError,
    LayerEntry,
    LocalImage,
    cached_archive,
    content_key,
    image_archive,
    layer_tar,
    resolve_cache_dir,
)

PAUSE_TAGS = (
    "registry.k8s.io/pause:3.10",
    # containerd v2.4's built-in default sandbox image; tagging it too means a containerd
    # config that does not set the sandbox image still finds one locally.
    "registry.k8s.io/pause:3.10.2",
    "csi-mock.local/pause:3.10",
)
BUSYBOX_TAGS = ("csi-mock.local/busybox:1",)
BUSYBOX_PACKAGE = "busybox-static"
DEFAULT_BUSYBOX = Path("/bin/busybox")

# Pinned images are never removed by the kubelet's image garbage collection, which matters
# because nothing could pull them back.
PINNED_LABEL = "io.cri-containerd.pinned=pinned"


class ImageImportError(RuntimeError):
    """``ctr images import`` failed or did not create the expected names."""


def build_pause_image(cache_dir: Path | None = None, *, compiler: str = "gcc") -> LocalImage:
    """The pause image (entrypoint ``/pause``), compiled with ``compiler -static -Os``."""
    source = resources.files("csi_harness._internal.core").joinpath("pause.c").read_bytes()
    flags = ("-static", "-Os", "-s", "-Wall")
    key = content_key(
        "pause",
        source,
        _compiler_identity(compiler).encode(),
        " ".join(flags).encode(),
        "\n".join(PAUSE_TAGS).encode(),
    )

    def build() -> bytes:
        binary = _compile_static(compiler, source, flags)
        layer = layer_tar([LayerEntry("pause", 0o755, binary)])
        return image_archive(layer, PAUSE_TAGS, entrypoint=["/pause"])

    return LocalImage(
        "pause", PAUSE_TAGS, cached_archive(resolve_cache_dir(cache_dir), "pause", key, build)
    )


def build_busybox_image(
    cache_dir: Path | None = None,
    *,
    busybox: Path = DEFAULT_BUSYBOX,
    tags: Sequence[str] = BUSYBOX_TAGS,
) -> LocalImage:
    """The busybox image: ``/bin/busybox``, one ``/bin/<applet>`` symlink per applet, ``sh``."""
    binary = _read_static_busybox(busybox)
    key = content_key("busybox", binary, "\n".join(tags).encode())

    def build() -> bytes:
        layer = layer_tar(_busybox_entries(binary, _busybox_applets(busybox)))
        return image_archive(layer, tags, cmd=["sh"])

    archive = cached_archive(resolve_cache_dir(cache_dir), "busybox", key, build)
    return LocalImage("busybox", tuple(tags), archive)


def build_agnhost_image(
    agnhost: Path,
    tags: Sequence[str],
    cache_dir: Path | None = None,
    *,
    busybox: Path = DEFAULT_BUSYBOX,
) -> LocalImage:
    """Kubernetes' e2e test image: ``/agnhost`` (entrypoint, built from
    k8s.io/kubernetes/test/images/agnhost) over the busybox layer, which gives the
    ``sh``, ``nsenter``, ``mount``, ``dd`` ... the storage specs run in it."""
    binary = agnhost.read_bytes()
    if not _is_static_elf(binary):
        raise ImageBuildError(f"{agnhost} is not a statically linked ELF binary")
    shell = _read_static_busybox(busybox)
    key = content_key("agnhost", binary, shell, "\n".join(tags).encode())

    def build() -> bytes:
        entries = _busybox_entries(shell, _busybox_applets(busybox))
        layer = layer_tar([*entries, LayerEntry("agnhost", 0o755, binary)])
        return image_archive(layer, tags, entrypoint=["/agnhost"], cmd=["pause"])

    archive = cached_archive(resolve_cache_dir(cache_dir), "agnhost", key, build)
    return LocalImage("agnhost", tuple(tags), archive)


def build_gnu_tools_image(
    tags: Sequence[str],
    tools: Sequence[Path],
    cache_dir: Path | None = None,
    *,
    busybox: Path = DEFAULT_BUSYBOX,
) -> LocalImage:
    """The busybox image with some of its applets replaced by the host's GNU programs
    (``tools``, e.g. /bin/dd for ``oflag=nocache``), copied with the shared libraries
    and loader they need, at the same paths."""
    shell = _read_static_busybox(busybox)
    files: dict[str, bytes] = {}
    for tool in tools:
        files[f"bin/{tool.name}"] = tool.read_bytes()
        for library in _shared_libraries(tool):
            files[str(library).lstrip("/")] = library.read_bytes()
    inputs = [shell, "\n".join(tags).encode()]
    inputs += [name.encode() + b"\0" + data for name, data in sorted(files.items())]
    key = content_key("gnu-tools", *inputs)

    def build() -> bytes:
        entries = {e.path: e for e in _busybox_entries(shell, _busybox_applets(busybox))}
        for name, data in files.items():
            for parent in list(Path(name).parents)[:-1]:
                entries.setdefault(str(parent), LayerEntry(str(parent), 0o755, directory=True))
            entries[name] = LayerEntry(name, 0o755, data)
        return image_archive(layer_tar(entries.values()), tags, cmd=["sh"])

    archive = cached_archive(resolve_cache_dir(cache_dir), "gnu-tools", key, build)
    return LocalImage("gnu-tools", tuple(tags), archive)


def _shared_libraries(program: Path) -> list[Path]:
    """The loader and libraries ``ldd`` says ``program`` loads (symlinks resolved)."""
    result = subprocess.run(
        ["ldd", str(program)], capture_output=True, text=True, check=False, timeout=30
    )
    if result.returncode != 0:
        raise ImageBuildError(f"ldd {program} failed: {result.stderr.strip()}")
    found = []
    for line in result.stdout.splitlines():
        words = line.split()
        path = words[2] if "=>" in words and len(words) > 2 else words[0] if words else ""
        if path.startswith("/"):
            found.append(Path(path))
    return found


def ensure_images(cache_dir: Path | None = None) -> list[LocalImage]:
    """Every image the local cluster needs, built or taken from the cache."""
    return [build_pause_image(cache_dir), build_busybox_image(cache_dir)]


def import_images(
    ctr: Path,
    address: str,
    images: Sequence[LocalImage],
    namespace: str = "k8s.io",
    *,
    snapshotter: str | None = None,
    unpack: bool = True,
    timeout: float = 300.0,
) -> None:
    """Import ``images`` into containerd at ``address`` and check that every tag exists.

    Images are labelled as pinned so that kubelet image garbage collection keeps them.
    Without ``unpack`` only their content is stored: the CRI unpacks an image when it
    first makes a container of it.
    Raises ImageImportError with ctr's stderr if an import fails.
    """
    base = [str(ctr), "--address", address, "--namespace", namespace]
    for image in images:
        argv = [*base, "images", "import", "--all-platforms", "--label", PINNED_LABEL]
        if snapshotter is not None:
            argv += ["--snapshotter", snapshotter]
        if not unpack:
            argv.append("--no-unpack")
        argv.append(str(image.tarball))
        _run_ctr(argv, timeout, f"importing {image.tarball}")
    listed = set(_run_ctr([*base, "images", "ls", "--quiet"], timeout, "listing images").split())
    missing = [tag for image in images for tag in image.tags if tag not in listed]
    if missing:
        raise ImageImportError(
            f"after import, containerd ({address}, namespace {namespace}) lacks {missing}; "
            f"it has {sorted(listed)}"
        )


def _compiler_identity(compiler: str) -> str:
    """The compiler's version line and the C library's version: both shape the binary."""
    if shutil.which(compiler) is None:
        raise ImageBuildError(f"C compiler {compiler!r} not found (apt-get install gcc libc6-dev)")
    result = subprocess.run(
        [compiler, "--version"], capture_output=True, text=True, check=False, timeout=30
    )
    first_line = result.stdout.splitlines()[0] if result.stdout else ""
    libc = os.confstr("CS_GNU_LIBC_VERSION") or "unknown libc"
    return f"{first_line}\n{libc}"


def _compile_static(compiler: str, source: bytes, flags: Sequence[str]) -> bytes:
    # Compiled under a fixed relative name in a scratch directory so no path of this
    # machine ends up in the binary.
    with tempfile.TemporaryDirectory(prefix="csi-mock-pause-") as scratch:
        Path(scratch, "pause.c").write_bytes(source)
        result = subprocess.run(
            [compiler, *flags, "-o", "pause", "pause.c"],
            cwd=scratch,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if result.returncode != 0:
            raise ImageBuildError(
                f"compiling pause.c with {compiler} {' '.join(flags)} failed "
                f"(a static build needs libc.a: apt-get install libc6-dev):\n{result.stderr}"
            )
        return Path(scratch, "pause").read_bytes()


def _read_static_busybox(busybox: Path) -> bytes:
    hint = f"install the {BUSYBOX_PACKAGE} package (apt-get install -y {BUSYBOX_PACKAGE})"
    try:
        binary = busybox.read_bytes()
    except FileNotFoundError:
        raise ImageBuildError(f"{busybox} not found: {hint}") from None
    if not _is_static_elf(binary):
        raise ImageBuildError(f"{busybox} is not a statically linked ELF binary: {hint}")
    return binary


def _is_static_elf(binary: bytes) -> bool:
    """True for an ELF executable without a program interpreter (PT_INTERP)."""
    if len(binary) < 64 or binary[:4] != b"\x7fELF":
        return False
    order = "<" if binary[5] == 1 else ">"
    if binary[4] == 2:  # 64-bit
        (phoff,) = struct.unpack_from(order + "Q", binary, 32)
        phentsize, phnum = struct.unpack_from(order + "HH", binary, 54)
    else:
        (phoff,) = struct.unpack_from(order + "I", binary, 28)
        phentsize, phnum = struct.unpack_from(order + "HH", binary, 42)
    pt_interp = 3
    for index in range(phnum):
        offset = phoff + index * phentsize
        if offset + 4 > len(binary):
            return False
        (p_type,) = struct.unpack_from(order + "I", binary, offset)
        if p_type == pt_interp:
            return False
    return True


def _busybox_applets(busybox: Path) -> list[str]:
    result = subprocess.run(
        [str(busybox), "--list"], capture_output=True, text=True, check=False, timeout=30
    )
    if result.returncode != 0:
        raise ImageBuildError(f"{busybox} --list failed: {result.stderr.strip()}")
    names = {name.strip() for name in result.stdout.splitlines()}
    return sorted(n for n in names if n and "/" not in n and n not in {"busybox", ".", ".."})


def _busybox_entries(binary: bytes, applets: Iterable[str]) -> list[LayerEntry]:
    links = {
        applet: LayerEntry(f"bin/{applet}", 0o777, link_target="busybox") for applet in applets
    }
    links.setdefault("sh", LayerEntry("bin/sh", 0o777, link_target="busybox"))
    return [
        LayerEntry("bin", 0o755, directory=True),
        LayerEntry("bin/busybox", 0o755, binary),
        *links.values(),
        LayerEntry("etc", 0o755, directory=True),
        LayerEntry("etc/passwd", 0o644, b"root:x:0:0:root:/root:/bin/sh\n"),
        LayerEntry("etc/group", 0o644, b"root:x:0:\n"),
        LayerEntry("tmp", 0o1777, directory=True),
    ]


def _run_ctr(argv: list[str], timeout: float, what: str) -> str:
    try:
        return run_command(argv, timeout=timeout)
    except CommandFailed as exc:
        raise ImageImportError(f"{what}: {exc}") from None
