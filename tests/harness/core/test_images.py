import hashlib
import io
import json
import signal
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from csi_harness._internal.core import image_archive, images
from csi_harness._internal.core.image_archive import ImageBuildError, LocalImage
from csi_harness._internal.core.images import (
    BUSYBOX_PACKAGE,
    ImageImportError,
    build_busybox_image,
    build_pause_image,
    import_images,
)

needs_busybox = pytest.mark.skipif(
    not images.DEFAULT_BUSYBOX.is_file(),
    reason=f"{images.DEFAULT_BUSYBOX} missing (apt-get install -y {BUSYBOX_PACKAGE})",
)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("images")


@pytest.fixture(scope="module")
def pause(cache: Path) -> LocalImage:
    return build_pause_image(cache)


@pytest.fixture(scope="module")
def busybox(cache: Path) -> LocalImage:
    if not images.DEFAULT_BUSYBOX.is_file():
        pytest.skip(f"{images.DEFAULT_BUSYBOX} missing (apt-get install -y {BUSYBOX_PACKAGE})")
    return build_busybox_image(cache)


def archive_members(tarball: Path) -> dict[str, bytes]:
    with tarfile.open(tarball) as tar:
        return {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def read_archive(tarball: Path) -> tuple[dict[str, object], dict[str, object], bytes]:
    """(manifest entry, config, layer) of a one-image, one-layer archive."""
    members = archive_members(tarball)
    (entry,) = json.loads(members["manifest.json"])
    config = json.loads(members[entry["Config"]])
    (layer_name,) = entry["Layers"]
    return entry, config, members[layer_name]


def layer_members(layer: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        return {m.name: m for m in tar.getmembers()}


def layer_file(layer: bytes, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        return tar.extractfile(name).read()  # type: ignore[union-attr]


def test_archive_is_in_docker_save_format_with_the_pause_tags(pause: LocalImage) -> None:
    entry, config, _ = read_archive(pause.tarball)
    assert entry["RepoTags"] == list(images.PAUSE_TAGS)
    assert "registry.k8s.io/pause:3.10" in pause.tags
    assert "csi-mock.local/pause:3.10" in pause.tags
    assert config["os"] == "linux"
    assert config["architecture"] == image_archive.host_architecture()
    assert config["config"]["Entrypoint"] == ["/pause"]  # type: ignore[index]


def test_config_names_the_layer_by_its_sha256(pause: LocalImage) -> None:
    entry, config, layer = read_archive(pause.tarball)
    diff_id = hashlib.sha256(layer).hexdigest()
    assert config["rootfs"] == {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]}
    assert entry["Layers"] == [f"{diff_id}/layer.tar"]


def test_config_file_is_named_by_its_own_sha256(pause: LocalImage) -> None:
    members = archive_members(pause.tarball)
    (entry,) = json.loads(members["manifest.json"])
    assert entry["Config"] == hashlib.sha256(members[entry["Config"]]).hexdigest() + ".json"


def test_archive_has_no_oci_layout_that_would_hide_the_repo_tags(pause: LocalImage) -> None:
    assert "oci-layout" not in archive_members(pause.tarball)


def test_layer_entries_are_owned_by_root_with_mtime_zero(busybox: LocalImage) -> None:
    _, _, layer = read_archive(busybox.tarball)
    members = layer_members(layer)
    assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 for m in members.values())
    assert list(members) == sorted(members, key=lambda name: name.split("/"))


@needs_busybox
def test_two_builds_are_byte_identical(tmp_path: Path) -> None:
    first = images.ensure_images(tmp_path / "a")
    second = images.ensure_images(tmp_path / "b")
    for one, other in zip(first, second, strict=True):
        assert one.tarball.name == other.tarball.name
        assert one.tarball.read_bytes() == other.tarball.read_bytes()


def test_cache_hit_returns_the_cached_tarball_without_building(
    pause: LocalImage, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_build(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("rebuilt although the inputs did not change")

    monkeypatch.setattr(images, "_compile_static", no_build)
    before = pause.tarball.stat()
    again = build_pause_image(cache)
    assert again == pause
    assert again.tarball.stat().st_mtime_ns == before.st_mtime_ns


def test_cache_leaves_no_temporary_files(pause: LocalImage, cache: Path) -> None:
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]


def test_changed_input_gives_a_new_cache_entry(
    pause: LocalImage, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(images, "PAUSE_TAGS", ("csi-mock.local/pause:other",))
    other = build_pause_image(cache)
    assert other.tarball != pause.tarball
    assert pause.tarball.is_file()


def test_default_cache_dir_follows_xdg_cache_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert image_archive.default_cache_dir() == tmp_path / "csi-mock" / "images"


def wait_until_catching(pid: int, sig: signal.Signals, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status").read_text()
        caught = int(
            next(line for line in status.splitlines() if line.startswith("SigCgt:"))[7:], 16
        )
        if caught & (1 << (sig - 1)):
            return
        time.sleep(0.01)
    raise AssertionError(f"pause (pid {pid}) did not install a {sig.name} handler in {timeout}s")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_pause_binary_exits_zero_on_termination_signal(
    pause: LocalImage, tmp_path: Path, sig: signal.Signals
) -> None:
    _, _, layer = read_archive(pause.tarball)
    binary = tmp_path / "pause"
    binary.write_bytes(layer_file(layer, "pause"))
    binary.chmod(0o755)
    process = subprocess.Popen([binary])
    try:
        wait_until_catching(process.pid, sig)
        assert process.poll() is None
        process.send_signal(sig)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_pause_binary_is_static(pause: LocalImage) -> None:
    _, _, layer = read_archive(pause.tarball)
    assert images._is_static_elf(layer_file(layer, "pause"))


def test_busybox_layer_has_sh_applets_and_a_minimal_root(busybox: LocalImage) -> None:
    _, config, layer = read_archive(busybox.tarball)
    members = layer_members(layer)
    assert members["bin/busybox"].isfile()
    assert members["bin/sh"].issym() and members["bin/sh"].linkname == "busybox"
    assert members["bin/ls"].linkname == "busybox"
    assert members["tmp"].isdir() and members["tmp"].mode == 0o1777
    assert layer_file(layer, "etc/passwd").startswith(b"root:x:0:0:")
    assert config["config"] == {
        "Cmd": ["sh"],
        "Env": [image_archive._PATH_ENV],
        "WorkingDir": "/",
    }
    assert busybox.tags == ("csi-mock.local/busybox:1",)


def test_busybox_in_the_layer_runs_sh(busybox: LocalImage, tmp_path: Path) -> None:
    _, _, layer = read_archive(busybox.tarball)
    binary = tmp_path / "busybox"
    binary.write_bytes(layer_file(layer, "bin/busybox"))
    binary.chmod(0o755)
    result = subprocess.run(
        [binary, "sh", "-c", "echo ok"], capture_output=True, text=True, timeout=10, check=True
    )
    assert result.stdout == "ok\n"


def test_missing_busybox_names_the_package(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildError, match=f"apt-get install -y {BUSYBOX_PACKAGE}"):
        build_busybox_image(tmp_path, busybox=tmp_path / "no-busybox")


def test_dynamically_linked_busybox_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildError, match=f"not a statically linked.*{BUSYBOX_PACKAGE}"):
        build_busybox_image(tmp_path, busybox=Path("/bin/ls"))


def test_missing_compiler_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildError, match="no-such-cc"):
        build_pause_image(tmp_path, compiler="no-such-cc")


FAKE_CTR = """#!/bin/sh
echo "$@" >> "{log}"
case "$*" in
  *" images ls "*) printf '%s\\n' {listed} ;;
  *" import "*) [ -n "{fail}" ] && {{ echo "ctr: {fail}" >&2; exit 1; }} ;;
esac
exit 0
"""


def fake_ctr(tmp_path: Path, listed: tuple[str, ...] = (), fail: str = "") -> tuple[Path, Path]:
    log = tmp_path / "ctr.log"
    ctr = tmp_path / "ctr"
    ctr.write_text(FAKE_CTR.format(log=log, listed=" ".join(listed), fail=fail))
    ctr.chmod(0o755)
    return ctr, log


def test_import_runs_ctr_import_for_every_image(tmp_path: Path) -> None:
    image = LocalImage("x", ("csi-mock.local/x:1",), tmp_path / "x.tar")
    ctr, log = fake_ctr(tmp_path, listed=image.tags)
    import_images(ctr, "/run/c.sock", [image])
    calls = log.read_text().splitlines()
    assert calls[0] == (
        "--address /run/c.sock --namespace k8s.io images import --all-platforms "
        f"--label {images.PINNED_LABEL} {image.tarball}"
    )
    assert calls[1] == "--address /run/c.sock --namespace k8s.io images ls --quiet"


def test_import_failure_carries_ctr_stderr(tmp_path: Path) -> None:
    image = LocalImage("x", ("csi-mock.local/x:1",), tmp_path / "x.tar")
    ctr, _ = fake_ctr(tmp_path, fail="unrecognized image format")
    with pytest.raises(ImageImportError, match="ctr: unrecognized image format"):
        import_images(ctr, "/run/c.sock", [image])


def test_import_that_creates_no_name_is_an_error(tmp_path: Path) -> None:
    image = LocalImage("x", ("csi-mock.local/x:1",), tmp_path / "x.tar")
    ctr, _ = fake_ctr(tmp_path, listed=("import-2026-01-01:latest",))
    with pytest.raises(ImageImportError, match=r"lacks \['csi-mock.local/x:1'\]"):
        import_images(ctr, "/run/c.sock", [image])


def test_import_passes_the_snapshotter(tmp_path: Path) -> None:
    image = LocalImage("x", ("csi-mock.local/x:1",), tmp_path / "x.tar")
    ctr, log = fake_ctr(tmp_path, listed=image.tags)
    import_images(ctr, "unix:///c.sock", [image], namespace="ns", snapshotter="native")
    assert "--snapshotter native" in log.read_text().splitlines()[0]


def test_gnu_tools_image_replaces_applets_with_the_host_programs_and_their_loader(
    busybox: LocalImage, cache: Path
) -> None:
    dd = Path("/bin/dd")
    if not dd.is_file():
        pytest.skip("no /bin/dd on this host")

    image = images.build_gnu_tools_image(("example/gnu-tools:1",), [dd], cache)

    entry, _, layer = read_archive(image.tarball)
    members = layer_members(layer)
    assert entry["RepoTags"] == ["example/gnu-tools:1"]
    assert members["bin/dd"].isfile()
    assert layer_file(layer, "bin/dd") == dd.read_bytes()
    assert members["bin/sh"].issym()  # Still busybox where not replaced.
    loaders = [name for name in members if "ld-linux" in name]
    assert loaders and all(members[name].isfile() for name in loaders)
