import argparse
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from csi_harness._internal import cli
from csi_harness._internal.cli import UsageError, build_config, build_parser, duration, main
from csi_harness._internal.kube.feature_gates import parse_feature_gates


def up_args(**given: Any) -> argparse.Namespace:
    """The namespace ``csi-harness cluster up`` parses, with only ``given`` set."""
    names = ("config", "name", "run_dir", "simulated_nodes", "zones", "feature_gates")
    defaults = dict.fromkeys((*names, "scheduler_config", "timeout"))
    return argparse.Namespace(**{**defaults, **given})


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    return tmp_path / "cluster.yaml"


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """main() must never get as far as touching a real cluster in these tests."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("main() went past input validation")

    monkeypatch.setattr(cli, "LocalCluster", refuse)


# -- --feature-gates ----------------------------------------------------------------


def test_parse_feature_gates_accepts_true_and_false_in_any_case() -> None:
    assert parse_feature_gates("A=true,B=False") == {"A": True, "B": False}


def test_parse_feature_gates_ignores_blanks_and_empty_items() -> None:
    assert parse_feature_gates(" A=TRUE , ,B=false,") == {"A": True, "B": False}


def test_parse_feature_gates_of_nothing_is_empty() -> None:
    assert parse_feature_gates("") == {}


def test_parse_feature_gates_rejects_a_value_that_is_not_a_boolean() -> None:
    with pytest.raises(ValueError, match=r"^'A=yes' is not NAME=true\|false"):
        parse_feature_gates("B=true,A=yes")


def test_parse_feature_gates_rejects_a_gate_without_value() -> None:
    with pytest.raises(ValueError, match=r"^'A' is not NAME=true\|false"):
        parse_feature_gates("A")


def test_parse_feature_gates_rejects_a_value_without_name() -> None:
    with pytest.raises(ValueError, match="'=true'"):
        parse_feature_gates("=true")


# -- build_config -------------------------------------------------------------------


def test_build_config_reads_the_config_file(config_file: Path) -> None:
    config_file.write_text("name: from-file\nsimulated_nodes: 4\nzones: [x]\n")
    config = build_config(up_args(config=str(config_file)))
    assert (config.name, config.simulated_nodes, config.zones) == ("from-file", 4, ["x"])


def test_build_config_flags_override_the_config_file(config_file: Path) -> None:
    config_file.write_text("name: from-file\nsimulated_nodes: 4\n")
    config = build_config(up_args(config=str(config_file), name="from-flag", simulated_nodes=0))
    assert (config.name, config.simulated_nodes) == ("from-flag", 0)


def test_build_config_splits_zones_on_commas() -> None:
    assert build_config(up_args(zones="a,b,")).zones == ["a", "b"]


def test_build_config_merges_feature_gate_flags_over_the_files(config_file: Path) -> None:
    config_file.write_text("feature_gates: {A: true, B: true}\n")
    config = build_config(up_args(config=str(config_file), feature_gates="B=false,C=true"))
    assert config.feature_gates == {"A": True, "B": False, "C": True}


def test_build_config_reads_the_scheduler_config_file(tmp_path: Path) -> None:
    scheduler = tmp_path / "scheduler.yaml"
    scheduler.write_text("profiles:\n- schedulerName: default-scheduler\n")
    config = build_config(up_args(scheduler_config=str(scheduler)))
    assert config.scheduler == {"profiles": [{"schedulerName": "default-scheduler"}]}


def test_build_config_error_names_the_file_and_the_bad_key(config_file: Path) -> None:
    config_file.write_text("simulated_nodes: -1\n")
    with pytest.raises(UsageError) as raised:
        build_config(up_args(config=str(config_file)))
    message = str(raised.value)
    assert message.startswith(f"{config_file}: invalid cluster configuration")
    assert "simulated_nodes: Input should be greater than or equal to 0" in message


def test_build_config_error_names_an_unknown_key(config_file: Path) -> None:
    config_file.write_text("simulated_nodes: 1\nkubelets: 2\n")
    with pytest.raises(UsageError, match=r"(?m)^  kubelets: Extra inputs are not permitted$"):
        build_config(up_args(config=str(config_file)))


def test_build_config_error_for_a_bad_flag_names_the_arguments() -> None:
    with pytest.raises(UsageError, match=r"^arguments: invalid cluster configuration"):
        build_config(up_args(zones="a,a"))


def test_build_config_rejects_a_config_file_that_is_not_a_mapping(config_file: Path) -> None:
    config_file.write_text("- simulated_nodes: 1\n")
    with pytest.raises(UsageError, match="the top level must be a mapping"):
        build_config(up_args(config=str(config_file)))


def test_build_config_reports_a_missing_config_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(UsageError, match=f"--config {missing}: .*No such file"):
        build_config(up_args(config=str(missing)))


def test_build_config_reports_invalid_yaml(config_file: Path) -> None:
    config_file.write_text("zones: [a\n")
    with pytest.raises(UsageError, match=f"--config {config_file}:"):
        build_config(up_args(config=str(config_file)))


# -- main ---------------------------------------------------------------------------


def test_main_returns_2_and_names_the_bad_key_for_a_bad_config_file(
    config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file.write_text("simulated_nodes: -1\n")
    assert main(["cluster", "up", "--config", str(config_file)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"csi-harness: {config_file}: invalid cluster configuration")
    assert "simulated_nodes:" in captured.err


def test_main_returns_2_for_an_unknown_key_in_the_config_file(
    config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file.write_text("bogus: 1\n")
    assert main(["cluster", "down", "--config", str(config_file)]) == 2
    assert "bogus: Extra inputs are not permitted" in capsys.readouterr().err


def test_main_returns_2_for_bad_feature_gates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "up", "--feature-gates", "A=yes"]) == 2
    assert "csi-harness: --feature-gates: 'A=yes' is not NAME=true|false" in capsys.readouterr().err


def test_main_returns_2_for_a_negative_simulated_node_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["cluster", "up", "--simulated-nodes", "-1"]) == 2
    assert "simulated_nodes:" in capsys.readouterr().err


def test_main_returns_2_when_the_files_feature_gates_are_not_a_mapping(
    config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file.write_text("feature_gates: [A]\n")
    assert main(["cluster", "up", "--config", str(config_file), "--feature-gates", "A=true"]) == 2
    assert "feature_gates" in capsys.readouterr().err


# -- what a user of the installed command sees --------------------------------------


def _subcommands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _subcommands(sub, (*path, name))
    return found


ALL_COMMANDS = _subcommands(build_parser())


def test_version_names_the_installed_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert (
        capsys.readouterr().out.strip() == f"csi-harness (csi-mock {metadata.version('csi-mock')})"
    )


@pytest.mark.parametrize("path", [p for p, _ in ALL_COMMANDS[1:]], ids=" ".join)
def test_every_subcommand_has_a_description(path: tuple[str, ...]) -> None:
    (parser,) = [p for q, p in ALL_COMMANDS if q == path]
    assert parser.description and len(parser.description) > 10


@pytest.mark.parametrize("path", [p for p, _ in ALL_COMMANDS], ids=lambda p: " ".join(p) or "top")
def test_help_names_no_path_of_the_source_tree(path: tuple[str, ...]) -> None:
    (parser,) = [p for q, p in ALL_COMMANDS if q == path]
    text = parser.format_help()
    for tree_only in ("docs/", "scripts/", "kind-config/", "csi_harness/", ".py"):
        assert tree_only not in text, f"{' '.join(path)} --help names {tree_only}"


def test_every_time_option_takes_a_go_duration() -> None:
    timed = [
        (path, action)
        for path, parser in ALL_COMMANDS
        for action in parser._actions
        if action.dest in ("timeout", "deadline", "stall")
    ]
    assert len(timed) >= 4
    for path, action in timed:
        assert action.type is duration, f"{' '.join(path)} {action.option_strings}"
    assert duration("1m30s") == 90.0
    assert duration("120") == 120.0
    with pytest.raises(argparse.ArgumentTypeError, match="not a duration"):
        duration("2 minutes")
    with pytest.raises(argparse.ArgumentTypeError, match="positive"):
        duration("0s")
