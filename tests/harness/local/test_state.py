from pathlib import Path

import pytest

from harness.local.state import STATE_FILE, ProcessRecord, RunState


def test_save_then_load_returns_an_equal_state(tmp_path: Path) -> None:
    state = RunState(
        run_dir=tmp_path,
        cluster="c1",
        phase="ready",
        ports={"etcd": 2379},
        processes={
            "etcd": ProcessRecord("etcd", 42, 1234, ["etcd", "--name=local"], "/logs/etcd.log")
        },
        nodes={"node-1": {"type": "kubelet", "zone": "zone-a"}},
        cgroup_root="/csi-harness/c1",
        bridge="csih01234567",
        extra_dirs=["/run/csi-harness/abc"],
        started_at=1.5,
        ready_after=20.25,
    )
    state.save()
    assert RunState.load(tmp_path) == state


def test_load_restores_paths_and_process_records(tmp_path: Path) -> None:
    RunState(tmp_path, processes={"a": ProcessRecord("a", 1, 2, ["x"], "a.log")}).save()
    loaded = RunState.load(tmp_path)
    assert loaded is not None
    assert isinstance(loaded.run_dir, Path)
    assert isinstance(loaded.processes["a"], ProcessRecord)


def test_save_writes_run_json_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    RunState(tmp_path).save()
    assert [p.name for p in tmp_path.iterdir()] == [STATE_FILE]


def test_load_of_a_run_dir_without_state_is_none(tmp_path: Path) -> None:
    assert RunState.load(tmp_path) is None


def test_load_of_a_missing_run_dir_is_none(tmp_path: Path) -> None:
    assert RunState.load(tmp_path / "absent") is None


def test_load_of_unparsable_json_raises_runtime_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text('{"run_dir": "/x", ')  # cut off mid-write
    with pytest.raises(RuntimeError, match=str(tmp_path / STATE_FILE)):
        RunState.load(tmp_path)


def test_load_of_an_unreadable_file_raises_runtime_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).mkdir()  # reading a directory fails even for root
    with pytest.raises(RuntimeError, match=str(tmp_path / STATE_FILE)):
        RunState.load(tmp_path)


def test_load_of_a_run_json_with_unknown_fields_raises_runtime_error_naming_the_file(
    tmp_path: Path,
) -> None:
    (tmp_path / STATE_FILE).write_text(f'{{"run_dir": "{tmp_path}", "field_from_the_future": 1}}')
    with pytest.raises(RuntimeError, match=str(tmp_path / STATE_FILE)):
        RunState.load(tmp_path)
