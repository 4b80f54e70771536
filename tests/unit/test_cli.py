import argparse
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from csi_mock import __version__
from csi_mock.cli import build_parser, main
from csi_mock.config import ConfigError
from csi_mock.hostpath_flags import resolve_config, resolve_configs

NODE_KEY = "topology.csi-mock.example/node"


def resolve(*argv: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return resolve_config(build_parser().parse_args(["serve", *argv]), env or {})


def test_hostpath_flags_map_to_the_same_meaning() -> None:
    config = resolve(
        "--endpoint=unix:///tmp/x.sock",
        "--nodeid=n1",
        "--drivername=hostpath.csi.k8s.io",
        "--statedir=/tmp/state",
        "--capacity",
        "fast=10Gi",
        "--capacity=slow=1Ti",
        "--max-volume-size=4Gi",
        "--maxvolumespernode=7",
        "--attach-limit=3",
        "--enable-attach",
        "--enable-topology=true",
    )
    assert config.name == "hostpath.csi.k8s.io"
    assert config.node.max_volumes_per_node == 3  # --attach-limit > 0 replaces it (hostpathplugin)
    assert config.controller.attach_limit == 3
    assert config.attach_required is True
    assert [(p.name, p.size, p.kinds) for p in config.pools] == [
        ("fast", 10 * 2**30, ["fast"]),
        ("slow", 2**40, ["slow"]),
    ]
    assert all(p.segment == {NODE_KEY: "n1"} for p in config.pools)
    assert all(p.max_volume_size == 4 * 2**30 for p in config.pools)


def test_go_style_single_dash_flags_are_accepted() -> None:
    config = resolve("-nodeid=n2", "-endpoint=unix:///tmp/y.sock")
    assert config.node.id == "n2"


def test_csi_endpoint_environment_variable_is_honoured() -> None:
    config = resolve("--nodeid=n1", env={"CSI_ENDPOINT": "unix:///tmp/env.sock"})
    assert config.endpoint == "unix:///tmp/env.sock"


def test_topology_off_leaves_capacity_pools_unbound() -> None:
    config = resolve("--nodeid=n1", "--capacity=fast=1Gi", "--enable-topology=false")
    assert config.pools[0].segment == {}


def test_bad_capacity_flag_names_the_flag() -> None:
    with pytest.raises(ConfigError, match="--capacity 'fast'"):
        resolve("--nodeid=n1", "--capacity=fast")


def test_serve_exits_2_with_a_message_naming_the_bad_key() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "csi_mock.cli", "serve", "--nodeid=n1", "--endpoint=/rel"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "endpoint: must be unix:///absolute/path.sock" in result.stderr


def test_version_flag_prints_the_package_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "csi_mock.cli", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.stdout.strip() == f"csi-mock {__version__}"


def test_plugins_registry_enables_registration_with_the_endpoint_as_kubelet_path() -> None:
    config = resolve(
        "--mode=node", "--nodeid=n1", "--endpoint=unix:///csi/csi.sock", "--plugins-registry=/reg"
    )
    assert config.registration_socket_path == Path("/reg/csi-mock.example-reg.sock")
    assert config.kubelet_endpoint == Path("/csi/csi.sock")


def test_kubelet_registration_path_takes_node_driver_registrars_meaning() -> None:
    config = resolve(
        "--nodeid=n1",
        "--plugins-registry=/registration",
        "--kubelet-registration-path=/var/lib/kubelet/plugins/csi-mock/csi.sock",
    )
    assert config.kubelet_endpoint == Path("/var/lib/kubelet/plugins/csi-mock/csi.sock")


def test_kubelet_registration_path_alone_registers_in_the_kubelets_default_registry() -> None:
    config = resolve("--nodeid=n1", "-kubelet-registration-path=/k/csi.sock")
    assert config.registration_socket_path == Path(
        "/var/lib/kubelet/plugins_registry/csi-mock.example-reg.sock"
    )


def test_registration_flags_override_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("node:\n  id: n1\n  registration:\n    plugins_registry: /file\n")
    config = resolve(f"--config={path}", "--kubelet-registration-path=/k/csi.sock")
    assert config.registration_socket_path == Path("/file/csi-mock.example-reg.sock")
    assert config.kubelet_endpoint == Path("/k/csi.sock")


def test_plugins_registry_in_controller_mode_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"node\.registration needs the node service"):
        resolve("--mode=controller", "--plugins-registry=/reg")


def test_a_relative_kubelet_registration_path_names_its_key() -> None:
    with pytest.raises(
        ConfigError, match=r"node\.registration\.kubelet_endpoint: must be an absolute path"
    ):
        resolve("--nodeid=n1", "--kubelet-registration-path=csi.sock")


# -- one process, several instances (--config given more than once) --------------------


def write_instance(root: Path, node: str, **extra: object) -> Path:
    path = root / f"{node}.yaml"
    settings = {
        "endpoint": f"unix://{root}/{node}.sock",
        "state_dir": str(root / node),
        "node": {"id": node},
        **extra,
    }
    path.write_text(yaml.safe_dump(settings))
    return path


def test_config_given_twice_is_an_instance_per_file(tmp_path: Path) -> None:
    files = [write_instance(tmp_path, node) for node in ("n1", "n2")]
    args = build_parser().parse_args(["serve", *(f"--config={f}" for f in files)])
    configs = resolve_configs(args, {"CSI_ENDPOINT": "unix:///elsewhere.sock"})
    assert [(c.node.id, c.socket_path) for c in configs] == [
        ("n1", tmp_path / "n1.sock"),
        ("n2", tmp_path / "n2.sock"),
    ]


def test_a_flag_beside_several_configs_is_refused_by_name(tmp_path: Path) -> None:
    files = [write_instance(tmp_path, node) for node in ("n1", "n2")]
    args = build_parser().parse_args(
        ["serve", *(f"--config={f}" for f in files), "--maxvolumespernode=3"]
    )
    with pytest.raises(ConfigError, match=r"^--maxvolumespernode: with --config given more"):
        resolve_configs(args, {})


def test_two_instances_on_one_socket_are_refused_before_either_starts(tmp_path: Path) -> None:
    first = write_instance(tmp_path, "n1")
    second = write_instance(tmp_path, "n2", endpoint=f"unix://{tmp_path}/n1.sock")
    run = subprocess.run(
        [sys.executable, "-m", "csi_mock", "serve", f"--config={first}", f"--config={second}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 2, run.stderr
    assert "endpoint: instances node n1 and node n2 both use" in run.stderr
    assert not (tmp_path / "n1.sock").exists()


def test_every_bad_flag_is_reported_at_once_each_naming_its_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = {
        "--maxvolumespernode=-5": "--maxvolumespernode: -5 is negative",
        "--attach-limit=-3": "--attach-limit: -3 is negative",
        "--v=high": "--v: 'high' is not a klog verbosity",
        "--enable-attach=yes": "--enable-attach: 'yes' is not a boolean",
        "--endpoint=tcp://127.0.0.1:1": "--endpoint: must be unix:///absolute/path.sock",
        "--capacity=fast": "--capacity 'fast': expected KIND=QUANTITY",
        "--max-volume-size=-1": "--max-volume-size: '-1' is negative",
        "--drivername=Not_DNS": "[--drivername]",
    }

    code = main(["serve", "--nodeid=n1", *bad])

    err = capsys.readouterr().err
    assert code == 2
    assert [problem for problem in bad.values() if problem not in err] == [], err


def _parsers(
    parser: argparse.ArgumentParser, path: str = "csi-mock"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_argument_of_every_command_has_help() -> None:
    missing = [
        f"{path} {action.option_strings or action.dest}"
        for path, parser in _parsers(build_parser())
        for action in parser._actions
        if not action.help and not isinstance(action, argparse._SubParsersAction)
    ]

    assert missing == []


def test_no_help_text_sends_the_reader_to_a_file_a_wheel_does_not_have() -> None:
    texts = [
        (path, text)
        for path, parser in _parsers(build_parser())
        for text in [parser.description or "", *(action.help or "" for action in parser._actions)]
    ]

    assert [(path, text) for path, text in texts if "docs/" in text or ".md" in text] == []
