from pathlib import Path

import pytest

from csi_harness._internal.core.run_state import STATE_FILE, ProcessRecord, RunState


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


def _add_records(run_dir: Path, prefix: str, count: int) -> None:
    state = RunState.load(run_dir)
    assert state is not None
    for i in range(count):
        with state.locked() as current:
            current.processes[f"{prefix}{i}"] = ProcessRecord(f"{prefix}{i}", i, i, ["x"], "x.log")


def test_locked_changes_of_processes_attached_to_one_run_are_all_kept(tmp_path: Path) -> None:
    # Two pytest workers start their drivers' processes at the same time: each holds
    # an old copy of the state, and neither may drop what the other recorded.
    import multiprocessing

    RunState(tmp_path, cluster="c1").save()
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_add_records, args=(tmp_path, p, 25)) for p in "ab"]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    loaded = RunState.load(tmp_path)
    assert loaded is not None and len(loaded.processes) == 50


def test_locked_reloads_what_another_process_saved(tmp_path: Path) -> None:
    mine = RunState(tmp_path, cluster="c1")
    mine.save()
    other = RunState.load(tmp_path)
    assert other is not None
    with other.locked() as state:
        state.processes["theirs"] = ProcessRecord("theirs", 1, 2, ["x"], "x.log")
    with mine.locked() as state:
        state.processes["mine"] = ProcessRecord("mine", 3, 4, ["y"], "y.log")
    assert set(mine.processes) == {"theirs", "mine"}
    loaded = RunState.load(tmp_path)
    assert loaded is not None and set(loaded.processes) == {"theirs", "mine"}
