"""A kind node image built on this machine, without any registry.

``kind build node-image`` downloads its base image and the control-plane images, so
it cannot run offline. This module does its steps from local parts:

1. a Debian root filesystem from ``debootstrap`` (systemd, iptables, conntrack, ...),
   cached as a tarball keyed by suite and package list;
2. kind's own base files (entrypoint, containerd configuration, kubelet unit and kubeadm
   drop-in) from the kind module at the pinned version, in the Go module cache;
3. the pinned binaries (``tools/build.sh``): containerd, runc, crictl, CNI plugins,
   kubeadm, kubelet, kubectl, and ``/kind/version``;
4. the images kubeadm asks for (``kubeadm config images list``), built as one-layer
   archives from the same binaries (``csi_harness._internal.core.images``) and imported into the
   root filesystem's ``/var/lib/containerd`` by a containerd run on the host against
   that directory, so the node starts with them unpacked;
5. ``docker import`` of the directory as ``csi-mock.local/kind-node:<version>-<key>``.

The key hashes every input (this recipe's source, the rootfs key, the binaries' build
keys, the kind version): a second build with the same inputs is a cache hit that only
checks ``docker image inspect``.

Two settings differ from kind's own image, both because this VM lacks
CAP_SYS_RESOURCE (docs/kind.md): containerd's ``restrict_oom_score_adj`` is on (kind
turns it on only when rootless), and the sandbox image is the pause tag kubeadm names.
CoreDNS is not built (it is not needed by the suites; docs/kind.md says how the
cluster does without it).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from csi_harness._internal.core.cache import user_cache_dir
from csi_harness._internal.core.commands import CommandFailed, run_command
from csi_harness._internal.core.image_archive import (
    LayerEntry,
    LocalImage,
    image_archive,
    layer_tar,
)
from csi_harness._internal.core.images import build_pause_image, import_images
from csi_harness._internal.core.package_data import DOCKER_ENGINE_SCRIPT, TOOLS_DIR
from csi_harness._internal.core.tools import Tools

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
ROOTFS_PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "conntrack",
    "iptables",
    "nftables",
    "iproute2",
    "ethtool",
    "util-linux",
    "mount",
    "kmod",
    "libseccomp2",
    "ca-certificates",
    "procps",
    "bash",
    "jq",  # kind's createContainer hook (mount-product-files.sh) runs it
)
IMAGE_REPOSITORY = "csi-mock.local/kind-node"
BAKED_TAG_SEPARATOR = "-images-"
"""Between a node image's tag and the key of the images baked into it (``baked_node_image``)."""
KIND_UNIT_DIR = TOOLS_DIR / "kind"
# What kube-proxy (iptables mode) executes, found in the rootfs with their libraries.
KUBE_PROXY_TOOLS = (
    "usr/sbin/xtables-nft-multi",
    "usr/sbin/xtables-legacy-multi",
    "usr/sbin/conntrack",
)
XTABLES_COMMANDS = (
    "iptables",
    "iptables-save",
    "iptables-restore",
    "ip6tables",
    "ip6tables-save",
    "ip6tables-restore",
)
CONTROL_PLANE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
NODE_BINARIES = {
    "usr/bin": ("kubeadm", "kubelet", "kubectl"),
    "usr/local/bin": ("containerd", "containerd-shim-runc-v2", "ctr", "crictl"),
    "usr/local/sbin": ("runc",),
    "opt/cni/bin": ("ptp", "bridge", "host-local", "loopback", "portmap"),
}
ENTRYPOINT = '["/usr/local/bin/entrypoint", "/sbin/init"]'


class NodeImageError(RuntimeError):
    """The node image could not be built; the message names the step and the fix."""


@dataclass(frozen=True)
class NodeImage:
    tag: str
    kubernetes_version: str
    cached: bool
    seconds: float


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/csi-mock/kind``, falling back to ``~/.cache/csi-mock/kind``."""
    return user_cache_dir("kind")


def build_node_image(
    tools: Tools,
    *,
    cache_dir: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> NodeImage:
    """The node image for the pinned toolset, built unless Docker already has it."""
    started = time.monotonic()
    cache = cache_dir or default_cache_dir()
    require_docker()
    for name in (*_all_binaries(), "etcd", "kube-proxy"):
        if not Path(tools[name]).exists():
            raise NodeImageError(
                f"{tools[name]} is missing: build the pinned tools first "
                '(`make tools TOOLS="kubernetes etcd containerd runc cni-plugins crictl kind"`)'
            )
    kind_dir = kind_module_dir()
    version = _run([tools["kubeadm"], "version", "-o", "short"]).strip()
    rootfs_key = short_hash([SUITE, MIRROR, *ROOTFS_PACKAGES])
    key = short_hash(
        [
            Path(__file__).read_text(),
            rootfs_key,
            kind_dir.name,
            *(os.path.realpath(tools[name]) for name in (*_all_binaries(), "etcd", "kube-proxy")),
        ]
    )
    tag = f"{IMAGE_REPOSITORY}:{version}-{key}"
    if docker_has(tag):
        return NodeImage(tag, version, True, time.monotonic() - started)
    rootfs = rootfs_tarball(cache, rootfs_key, progress)
    with tempfile.TemporaryDirectory(prefix="csi-mock-kind-node-", dir=scratch_dir()) as tmp:
        root = Path(tmp) / "rootfs"
        progress(f"node image: unpacking {rootfs.name}")
        root.mkdir()
        _run(["tar", "-C", str(root), "-xf", str(rootfs)])
        progress(f"node image: kind {kind_dir.name} base files, binaries, systemd units")
        _install_kind_files(kind_dir, root)
        _install_binaries(tools, root)
        wanted = _kubeadm_images(tools, version)
        _configure_containerd(tools, root, wanted)
        _configure_systemd(root)
        (root / "kind" / "version").write_text(version)
        _write_default_storage(root)
        progress("node image: building and importing the control-plane images")
        images = _control_plane_images(tools, root, wanted, Path(tmp) / "images")
        import_into_rootfs(tools, root, images, Path(tmp) / "containerd")
        progress(f"node image: docker import as {tag}")
        _docker_import(root, tag, version)
    return NodeImage(tag, version, False, time.monotonic() - started)


def is_offline_node_image(image: str) -> bool:
    """Whether ``image`` is one ``build_node_image`` made (not one of kind's or the
    user's): only those get the suites' images baked in (``baked_node_image``)."""
    return image.startswith(f"{IMAGE_REPOSITORY}:") and BAKED_TAG_SEPARATOR not in image


def kind_module_dir() -> Path:
    """The source of the pinned kind module (``go mod download``: the Go module cache,
    or the module proxy the first time)."""
    env = dict(os.environ, GOFLAGS="-mod=mod", GOWORK="off", GOTOOLCHAIN="local")
    out = _run(["go", "mod", "download", "-json", "sigs.k8s.io/kind"], cwd=KIND_UNIT_DIR, env=env)
    directory = Path(json.loads(out)["Dir"])
    if not (directory / "images" / "base" / "files").is_dir():
        raise NodeImageError(f"{directory} has no images/base/files: not a kind source tree")
    return directory


def rootfs_tarball(cache: Path, key: str, progress: Callable[[str], None]) -> Path:
    """The debootstrapped root filesystem as a tarball in ``cache``, built once per key."""
    target = cache / f"rootfs-{SUITE}-{key}.tar"
    if target.is_file():
        return target
    if shutil.which("debootstrap") is None:
        raise NodeImageError("debootstrap is not installed: `apt-get install debootstrap`")
    cache.mkdir(parents=True, exist_ok=True)
    progress(f"node image: debootstrap {SUITE} ({len(ROOTFS_PACKAGES)} packages)")
    with tempfile.TemporaryDirectory(prefix="csi-mock-rootfs-", dir=scratch_dir()) as tmp:
        root = Path(tmp) / "rootfs"
        include = ",".join(ROOTFS_PACKAGES)
        _run(["debootstrap", "--variant=minbase", f"--include={include}", SUITE, str(root), MIRROR])
        for cached in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for item in (root / cached).glob("*"):
                if item.is_file():
                    item.unlink()
        partial = target.with_suffix(".tmp")
        _run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."])
        partial.replace(target)
    return target


# -- steps ------------------------------------------------------------------------------


def _install_kind_files(kind_dir: Path, root: Path) -> None:
    files = kind_dir / "images" / "base" / "files"
    for source in sorted(files.rglob("*")):
        if source.is_dir() or source.parent.name == "LICENSES":
            continue
        relative = source.relative_to(files)
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        executable = relative.parts[:3] == ("usr", "local", "bin") or relative.parts[:2] == (
            "kind",
            "bin",
        )
        target.chmod(0o755 if executable else 0o644)
    (root / "etc" / "kubernetes" / "manifests").mkdir(parents=True, exist_ok=True)


def _all_binaries() -> list[str]:
    return [
        *CONTROL_PLANE_BINARIES,
        *(name for names in NODE_BINARIES.values() for name in names),
    ]


def _install_binaries(tools: Tools, root: Path) -> None:
    for directory, names in NODE_BINARIES.items():
        (root / directory).mkdir(parents=True, exist_ok=True)
        for name in names:
            target = root / directory / name
            shutil.copyfile(os.path.realpath(tools[name]), target)
            target.chmod(0o755)


def _kubeadm_images(tools: Tools, version: str) -> list[str]:
    out = _run([tools["kubeadm"], "config", "images", "list", "--kubernetes-version", version])
    return [line.strip() for line in out.splitlines() if line.strip()]


def _configure_containerd(tools: Tools, root: Path, wanted: Sequence[str]) -> None:
    config = root / "etc" / "containerd" / "config.toml"
    text = config.read_text()
    # This VM cannot grant CAP_SYS_RESOURCE, which writing a lower oom_score_adj needs.
    text, found = re.subn(r"restrict_oom_score_adj = false", "restrict_oom_score_adj = true", text)
    if found != 1:
        raise NodeImageError(f"kind's {config.name} no longer sets restrict_oom_score_adj")
    (pause,) = [image for image in wanted if "/pause:" in image]
    text, found = re.subn(r'sandbox_image = "[^"]*"', f'sandbox_image = "{pause}"', text)
    if found != 1:
        raise NodeImageError(f"kind's {config.name} no longer sets sandbox_image")
    config.write_text(text)
    # kind's base image: `ctr oci spec`, a createContainer hook, no rlimits.
    spec = json.loads(_run([tools["ctr"], "oci", "spec"]))
    hooks = spec.setdefault("hooks", {}).setdefault("createContainer", [])
    hooks.append({"path": "/kind/bin/mount-product-files.sh"})
    spec["process"].pop("rlimits", None)
    (root / "etc" / "containerd" / "cri-base.json").write_text(json.dumps(spec, indent=2))


def _configure_systemd(root: Path) -> None:
    system = root / "lib" / "systemd" / "system"
    (system / "sysinit.target.wants" / "systemd-tmpfiles-setup.service").unlink(missing_ok=True)
    for pattern in (
        "lib/systemd/system/multi-user.target.wants/*",
        "etc/systemd/system/*.wants/*",
        "lib/systemd/system/local-fs.target.wants/*",
        "lib/systemd/system/sockets.target.wants/*udev*",
        "lib/systemd/system/sockets.target.wants/*initctl*",
        "lib/systemd/system/basic.target.wants/*",
    ):
        for path in root.glob(pattern):
            path.unlink()
    with (root / "etc" / "systemd" / "journald.conf").open("a") as f:
        f.write("ReadKMsg=no\n")
    wants = root / "etc" / "systemd" / "system" / "multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    for unit in ("kubelet.service", "containerd.service", "undo-mount-hacks.service"):
        _symlink(f"/etc/systemd/system/{unit}", wants / unit)
    _symlink("/dev/null", root / "etc" / "systemd" / "system" / "systemd-binfmt.service")
    _symlink("/usr/lib/systemd/systemd", root / "sbin" / "init")


def _write_default_storage(root: Path) -> None:
    # kind applies this file as the default storage; without it, it would create a
    # default class for kubernetes.io/host-path, which no provisioner serves here.
    # csi-mock is the storage, so the file only says so.
    manifests = root / "kind" / "manifests"
    manifests.mkdir(parents=True, exist_ok=True)
    (manifests / "default-storage.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: csi-mock-kind-node\n"
        "  namespace: kube-system\ndata:\n  storage: >-\n    no default StorageClass: "
        "csi-mock's classes are created by its deployment\n"
    )


def _control_plane_images(
    tools: Tools, root: Path, wanted: Sequence[str], directory: Path
) -> list[LocalImage]:
    """Archives of the images kubeadm asks for (``wanted``), built from the pinned
    binaries."""
    directory.mkdir()
    images: list[LocalImage] = []
    for reference in wanted:
        name = reference.rsplit("/", 1)[-1].split(":", 1)[0]
        if name in CONTROL_PLANE_BINARIES:
            layer = _binary_layer(tools, name)
        elif name == "kube-proxy":
            layer = _binary_layer(tools, name, extra=_kube_proxy_tools(root))
        elif name == "etcd":
            # kubeadm asks for its own etcd tag; the pinned etcd serves under it.
            layer = _binary_layer(tools, name)
        elif name == "pause":
            pause = build_pause_image()
            images.append(_retag(pause, reference, directory))
            continue
        elif name == "coredns":
            continue  # not built: docs/kind.md
        else:
            raise NodeImageError(f"kubeadm asks for {reference}, which this recipe cannot build")
        path = directory / f"{name}.tar"
        path.write_bytes(image_archive(layer, [reference]))
        images.append(LocalImage(name, (reference,), path))
    # kind's own containerd configuration names pause 3.10 too;
    # csi_harness._internal.providers.local's pause
    # image carries that tag.
    images.append(build_pause_image())
    return images


def _retag(image: LocalImage, reference: str, directory: Path) -> LocalImage:
    """``image`` (a one-image ``docker save`` archive) under the single tag ``reference``."""
    with tarfile.open(image.tarball) as archive:
        members = {m.name: archive.extractfile(m) for m in archive.getmembers() if m.isfile()}
        data = {name: f.read() for name, f in members.items() if f is not None}
    (manifest,) = json.loads(data["manifest.json"])
    manifest["RepoTags"] = [reference]
    data["manifest.json"] = json.dumps([manifest]).encode()
    entries = [LayerEntry(name, 0o644, content) for name, content in data.items()]
    entries += [
        LayerEntry(d, 0o755, directory=True) for d in {n.split("/")[0] for n in data if "/" in n}
    ]
    path = directory / f"{image.name}-{reference.rsplit(':', 1)[-1]}.tar"
    path.write_bytes(layer_tar(entries))
    return LocalImage(image.name, (reference,), path)


def _binary_layer(tools: Tools, name: str, extra: Iterable[LayerEntry] = ()) -> bytes:
    binary = Path(os.path.realpath(tools[name])).read_bytes()
    return layer_tar(_with_parents([LayerEntry(f"usr/local/bin/{name}", 0o755, binary), *extra]))


def _with_parents(entries: Sequence[LayerEntry]) -> list[LayerEntry]:
    """``entries`` plus a directory entry for every parent they need (and do not have),
    so that no runtime has to guess the parents' modes."""
    present = {entry.path for entry in entries}
    parents = {
        "/".join(entry.path.split("/")[:depth])
        for entry in entries
        for depth in range(1, entry.path.count("/") + 1)
    }
    missing = sorted(parents - present)
    return [*entries, *(LayerEntry(path, 0o755, directory=True) for path in missing)]


def _kube_proxy_tools(root: Path) -> list[LayerEntry]:
    """iptables (nft and legacy backends), conntrack and their libraries, from the rootfs."""
    paths: set[str] = set(KUBE_PROXY_TOOLS)
    for tool in KUBE_PROXY_TOOLS:
        out = _run(["chroot", str(root), "/usr/bin/ldd", f"/{tool}"])
        for match in re.finditer(r"(/\S+) \(0x", out):
            paths.add(match.group(1).lstrip("/"))
    entries: dict[str, LayerEntry] = {}
    for path in sorted(paths):
        _add_with_links(root, path, entries)
    xtables = root / "usr" / "lib" / "x86_64-linux-gnu" / "xtables"
    for module in sorted(xtables.glob("*.so")):
        _add_with_links(root, str(module.relative_to(root)), entries)
    for command in XTABLES_COMMANDS:
        # The nft backend, as Debian's alternatives choose by default.
        entries[f"usr/sbin/{command}"] = LayerEntry(
            f"usr/sbin/{command}", 0o777, link_target="xtables-nft-multi"
        )
    return list(entries.values())


def _add_with_links(root: Path, path: str, entries: dict[str, LayerEntry]) -> None:
    """``path`` (relative to ``root``) and, when it is a symlink, what it points to."""
    while path not in entries:
        full = root / path
        if full.is_symlink():
            target = os.readlink(full)
            entries[path] = LayerEntry(path, 0o777, link_target=target)
            path = os.path.normpath(os.path.join(os.path.dirname(path), target)).lstrip("/")
            continue
        entries[path] = LayerEntry(path, 0o755, full.read_bytes())


def import_into_rootfs(
    tools: Tools, root: Path, images: Sequence[LocalImage], state: Path, *, unpack: bool = True
) -> None:
    """Run the pinned containerd on the host with the rootfs's /var/lib/containerd as
    its root, import ``images`` there (pinned; unpacked for the overlayfs snapshotter
    unless ``unpack`` is false), and stop it."""
    state.mkdir()
    address = state / "containerd.sock"
    config = state / "config.toml"
    config.write_text(
        "version = 3\n"
        f'root = "{root}/var/lib/containerd"\n'
        f'state = "{state}/run"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime",'
        ' "io.containerd.cri.v1.images", "io.containerd.podsandbox.controller.v1.podsandbox"]\n'
        f'[grpc]\n  address = "{address}"\n'
    )
    log = (state / "containerd.log").open("w")
    process = subprocess.Popen(
        [tools["containerd"], "--config", str(config)], stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 30
        while not address.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise NodeImageError(
                    "containerd for the image import did not start: "
                    + (state / "containerd.log").read_text()[-2000:]
                )
            time.sleep(0.1)
        import_images(
            Path(tools["ctr"]),
            str(address),
            images,
            snapshotter="overlayfs" if unpack else None,
            unpack=unpack,
        )
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def _docker_import(root: Path, tag: str, version: str) -> None:
    changes = [
        f"ENTRYPOINT {ENTRYPOINT}",
        "ENV container=docker",
        f"LABEL io.x-k8s.kind.kubernetes-version={version}",
    ]
    argv = ["docker", "import"]
    for change in changes:
        argv += ["--change", change]
    imported = f"{tag}-imported"
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "-C", str(root), "-c", "."], stdout=subprocess.PIPE
    )
    try:
        result = subprocess.run(
            [*argv, "-", imported], stdin=tar.stdout, capture_output=True, text=True, check=False
        )
    finally:
        if tar.stdout is not None:
            tar.stdout.close()
        tar.wait()
    if result.returncode != 0 or tar.returncode != 0:
        raise NodeImageError(f"docker import {imported} failed: {result.stderr.strip()}")
    # `docker import` takes no STOPSIGNAL; systemd as PID 1 stops cleanly on SIGRTMIN+3.
    # A one-line build without context adds it (nothing is pulled or run).
    dockerfile = f"FROM {imported}\nSTOPSIGNAL SIGRTMIN+3\n"
    result = subprocess.run(
        ["docker", "build", "-q", "-t", tag, "-"],
        input=dockerfile,
        capture_output=True,
        text=True,
        check=False,
    )
    subprocess.run(["docker", "rmi", imported], capture_output=True, check=False)
    if result.returncode != 0:
        raise NodeImageError(f"docker build of {tag} failed: {result.stderr.strip()}")


# -- small pieces -----------------------------------------------------------------------


def require_docker() -> None:
    """Raise NodeImageError naming the fix unless a Docker engine answers."""
    if shutil.which("docker") is None:
        raise NodeImageError(
            f"no docker CLI: install docker.io (bash {DOCKER_ENGINE_SCRIPT} start)"
        )
    result = subprocess.run(["docker", "info"], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise NodeImageError(
            "the Docker engine does not answer (`docker info` failed): start it with "
            f"`bash {DOCKER_ENGINE_SCRIPT} start`\n{result.stderr.strip()}"
        )


def docker_has(tag: str) -> bool:
    """Whether the local Docker engine has an image of this tag."""
    result = subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=False)
    return result.returncode == 0


def scratch_dir() -> str:
    # Not /tmp: it may be a small tmpfs, and the rootfs holds about a gigabyte.
    path = Path(os.environ.get("CSI_MOCK_SCRATCH", "/var/tmp"))
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


def _symlink(target: str, link: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target)


def short_hash(parts: Sequence[str]) -> str:
    """The parts, length-prefixed, as 12 hex digits of SHA-256 (a tag's key)."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode()
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()[:12]


def _run(argv: Sequence[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    try:
        return run_command(argv, cwd=cwd, env=env)
    except CommandFailed as exc:
        raise NodeImageError(str(exc)) from exc
