"""`csi-mock ctl` against a driver started by `csi-mock serve`, both as subprocesses."""

from __future__ import annotations

import contextlib
import io
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from csi_mock.admin import AdminClient, AdminError, FaultSpec
from csi_mock.admin.ctl import DEFAULT_SOCKET, table
from csi_mock.cli import build_parser, main
from csi_mock.config import validate_config
from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from csi_mock.proto.pluginregistration_pb2 import RegistrationStatus
from csi_mock.proto.pluginregistration_pb2_grpc import RegistrationStub
from tests.driver.csi_helpers import NODE_KEY, GiB, create_request, on_node

TOKEN = "ctl-test-token-0123456789"
START_TIMEOUT = 20.0
STOP_TIMEOUT = 15.0


def wait_until(
    check: Callable[[], bool], timeout: float, expected: str, seen: Callable[[], str]
) -> None:
    """Poll `check` every 50ms; fail naming what was expected and what was seen."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"after {timeout}s still not {expected}; seen:\n{seen()}")
        time.sleep(0.05)


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str


@dataclass
class ServedDriver:
    """A `csi-mock serve` subprocess with gRPC stubs and ways to run `csi-mock ctl`."""

    process: subprocess.Popen[bytes]
    admin_socket: Path
    csi_socket: Path
    log: Path
    token_file: Path
    channel: grpc.Channel

    @property
    def controller(self) -> pb_grpc.ControllerStub:
        return pb_grpc.ControllerStub(self.channel)

    def ctl(self, *argv: str) -> Ran:
        """`python -m csi_mock.cli ctl --socket ... ARGV` as a subprocess."""
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "csi_mock.cli",
                "ctl",
                "--socket",
                str(self.admin_socket),
                *argv,
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return Ran(done.returncode, done.stdout, done.stderr)

    def run(self, *argv: str, socket: bool = True) -> Ran:
        """The same command through cli.main in this process (no interpreter start-up)."""
        where = ["--socket", str(self.admin_socket)] if socket else []
        return run_main("ctl", *where, *argv)

    def tcp_url(self) -> str:
        found = re.search(r"admin API on (http://\S+)", self.log.read_text())
        assert found, self.log.read_text()
        return found.group(1)

    def create(self, name: str, size: int = GiB) -> None:
        self.controller.CreateVolume(create_request(name, size, requisite=["node-1"]))

    def capacity(self, node: str = "node-1") -> tuple[int, int]:
        report = self.controller.GetCapacity(
            pb.GetCapacityRequest(accessible_topology=on_node(node))
        )
        return report.available_capacity, report.maximum_volume_size.value

    def admin(self) -> AdminClient:
        return AdminClient(self.admin_socket)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=STOP_TIMEOUT)


def ok(ran: Ran) -> str:
    assert ran.code == 0, f"exit {ran.code}: {ran.err}"
    return ran.out


def run_main(*argv: str) -> Ran:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as stopped:
            code = int(stopped.code or 0)
    return Ran(code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def serving(root: Path, plugins_registry: Path | None = None) -> Iterator[ServedDriver]:
    """`csi-mock serve` with a temp config: pool node-1 for volumes, pool spare to resize.

    With `plugins_registry` the driver also registers with the kubelet through it.
    """
    token_file = root / "token"
    token_file.write_text(TOKEN)
    config: dict[str, Any] = {
        "endpoint": f"unix://{root}/csi.sock",
        "state_dir": str(root / "state"),
        "node": {"id": "node-1", "mount": "directory"},
        "pools": [
            {"name": "node-1", "size": "100Gi", "segment": {NODE_KEY: "node-1"}},
            {"name": "spare", "size": "10Gi", "segment": {NODE_KEY: "node-2"}},
        ],
        "admin": {"tcp": "127.0.0.1:0", "token_file": str(token_file)},
    }
    if plugins_registry is not None:
        config["node"]["registration"] = {"plugins_registry": str(plugins_registry)}
    config_path = root / "driver.yaml"
    config_path.write_text(yaml.safe_dump(config))
    log = root / "driver.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "csi_mock.cli", "serve", "--config", str(config_path)],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    driver = ServedDriver(
        process=process,
        admin_socket=root / "state" / "admin.sock",
        csi_socket=root / "csi.sock",
        log=log,
        token_file=token_file,
        channel=grpc.insecure_channel(f"unix://{root}/csi.sock"),
    )
    try:
        wait_until(
            lambda: process.poll() is not None or "admin API on http" in log.read_text(),
            START_TIMEOUT,
            "serving its admin API",
            log.read_text,
        )
        assert process.poll() is None, f"csi-mock serve exited:\n{log.read_text()}"
        with driver.admin() as admin:
            assert admin.health().ready
        yield driver
    finally:
        driver.channel.close()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def shared_driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedDriver]:
    with serving(tmp_path_factory.mktemp("ctl")) as driver:
        yield driver


@pytest.fixture
def served(shared_driver: ServedDriver) -> Iterator[ServedDriver]:
    """The shared driver, with every knob put back after the test (volumes stay)."""
    yield shared_driver
    with shared_driver.admin() as admin:
        admin.clear_faults()
        admin.unfreeze_capacity()
        admin.set_limits(max_volumes_per_node=0, attach_limit=0)
        admin.set_switches(
            controller_expansion=True,
            node_expansion=True,
            node_expansion_required=True,
            online_expansion=True,
            volume_stats=True,
        )
        spare = admin.pool("spare")
        if spare.external:
            admin.release("spare", spare.external)
        admin.resize_pool("spare", 10 * GiB)


# -- against a running driver ------------------------------------------------------------


def test_fault_add_fails_the_next_create_volume_and_the_journal_shows_the_rule(
    served: ServedDriver,
) -> None:
    command = "fault add --method CreateVolume --code RESOURCE_EXHAUSTED --times 1 --json"
    rule_id = json.loads(ok(served.ctl(*command.split())))["id"]

    with pytest.raises(grpc.RpcError) as raised:
        served.create("pvc-done-when")
    served.create("pvc-done-when")

    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    journal = ok(served.ctl("journal", "--method", "CreateVolume", "--json"))
    records = [r for r in json.loads(journal) if r["request"].get("name") == "pvc-done-when"]
    assert [(r["code"], r["fault"]) for r in records] == [
        ("RESOURCE_EXHAUSTED", rule_id),
        ("OK", None),
    ]


def test_fault_list_shows_counters_and_rm_reports_the_final_ones(served: ServedDriver) -> None:
    ok(served.run("fault", "add", "--method", "CreateVolume", "--code", "ABORTED", "--id", "abort"))
    with pytest.raises(grpc.RpcError):
        served.create("pvc-aborted")

    listing = ok(served.run("fault", "list")).splitlines()
    removed = ok(served.run("fault", "rm", "abort"))

    assert listing[0].split() == ["ID", "METHOD", "ACTION", "FIRING", "MATCH", "MATCHED", "FIRED"]
    assert listing[1].split() == [
        "abort",
        "CreateVolume",
        "error",
        "ABORTED",
        "always",
        "-",
        "1",
        "1",
    ]
    assert removed.strip() == "removed abort (matched 1, fired 1)"


def test_fault_add_takes_every_rule_field(served: ServedDriver) -> None:
    command = (
        "--json fault add --method GetCapacity --override available_capacity=0 --delay 10ms"
        " --skip 1 --times 2 --probability 0.5 --seed 4 --volume v* --node n*"
        " --param kind=fast --topology zone=a --id everything"
        ' --where parameters["kind"]=f* --where accessible_topology.segments["zone"]=a'
        " --rescue unavailable --reply {}"
    )
    added = ok(served.run(*command.split()))

    assert json.loads(added) == {
        "id": "everything",
        "method": "GetCapacity",
        "matched": 0,
        "fired": 0,
        "error": None,
        "delay": 0.01,
        "hang": False,
        "override": {"available_capacity": 0},
        "rescue": {"code": "UNAVAILABLE", "reply": {}},
        "volume": "v*",
        "node": "n*",
        "parameters": {"kind": "fast"},
        "topology": {"zone": "a"},
        "where": {'parameters["kind"]': "f*", 'accessible_topology.segments["zone"]': "a"},
        "times": 2,
        "skip": 1,
        "probability": 0.5,
        "seed": 4,
    }


def test_capacity_freeze_keeps_get_capacity_constant_while_volumes_are_created(
    served: ServedDriver,
) -> None:
    before = served.capacity()
    with served.admin() as admin:
        used = admin.pool("node-1").used
    assert ok(served.ctl("capacity", "freeze")).startswith("capacity: frozen")

    for index in range(3):
        served.create(f"pvc-frozen-{index}", 2 * GiB)
        assert served.capacity() == before

    assert ok(served.run("capacity", "status")).startswith("capacity: frozen")
    (pool,) = [
        p for p in json.loads(ok(served.run("pool", "list", "--json"))) if p["name"] == "node-1"
    ]
    assert pool["used"] == used + 6 * GiB
    ok(served.run("capacity", "unfreeze"))
    assert served.capacity()[0] == before[0] - 6 * GiB


def test_metrics_show_the_calls_made(served: ServedDriver) -> None:
    def totals(text: str) -> dict[tuple[str, str], float]:
        return {
            (s.labels["method"], s.labels["code"]): s.value
            for family in text_string_to_metric_families(text)
            if family.name == "csi_mock_rpc"
            for s in family.samples
            if s.name == "csi_mock_rpc_total"
        }

    before = totals(ok(served.run("metrics")))
    for _ in range(2):
        served.capacity()
    served.create("pvc-counted")

    after = totals(ok(served.ctl("metrics")))

    made = {key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key)}
    assert made == {("GetCapacity", "OK"): 2, ("CreateVolume", "OK"): 1}


def test_pool_commands_print_sizes_as_quantities(served: ServedDriver) -> None:
    resized = ok(served.run("pool", "resize", "spare", "12Gi")).splitlines()
    consumed = ok(served.run("pool", "consume", "spare", "1Gi")).splitlines()

    header = resized[0].split()
    row = dict(zip(header, resized[1].split(), strict=True))
    assert (row["TOTAL"], row["USED"], row["FREE"]) == ("12Gi", "0", "12Gi")
    row = dict(zip(header, consumed[1].split(), strict=True))
    assert (row["EXTERNAL"], row["FREE"], row["MAX-VOLUME"]) == ("1Gi", "11Gi", "default=11Gi")
    released = ok(served.run("pool", "release", "spare", "1073741824")).splitlines()
    assert dict(zip(header, released[1].split(), strict=True))["EXTERNAL"] == "0"


def test_resizing_an_unknown_pool_exits_1_naming_the_pool(served: ServedDriver) -> None:
    before = ok(served.run("--json", "pool", "list"))

    result = served.ctl("pool", "resize", "nosuch", "1Gi")

    assert result.code == 1
    assert result.out == ""
    assert "no pool named 'nosuch'" in result.err
    assert "(field: name)" in result.err
    assert ok(served.run("--json", "pool", "list")) == before


def test_a_refused_knob_exits_1_naming_the_field_and_changes_nothing(
    served: ServedDriver,
) -> None:
    shrink = served.run("pool", "resize", "spare", "10Gi")
    ok(served.run("pool", "consume", "spare", "4Gi"))

    too_small = served.run("pool", "resize", "spare", "3Gi")

    assert shrink.code == 0
    assert too_small.code == 1
    assert "cannot shrink below" in too_small.err
    assert "(field: size)" in too_small.err
    assert json.loads(ok(served.run("--json", "pool", "show", "spare")))["total"] == 10 * GiB


def test_an_invalid_rule_exits_1_naming_the_field(served: ServedDriver) -> None:
    result = served.run("fault", "add", "--method", "CreateVolume", "--code", "NOPE")

    assert result.code == 1
    assert "error.code: 'NOPE' is not a gRPC status code" in result.err
    assert json.loads(ok(served.run("fault", "list", "--json"))) == []


def test_limits_show_and_set(served: ServedDriver) -> None:
    shown = ok(served.run("limits", "--max-volumes-per-node", "3")).splitlines()

    assert [line.split()[:2] for line in shown] == [
        ["LIMIT", "VALUE"],
        ["max_volumes_per_node", "3"],
        ["attach_limit", "0"],
    ]
    assert json.loads(ok(served.run("--json", "limits"))) == {
        "max_volumes_per_node": 3,
        "attach_limit": 0,
    }
    info = pb_grpc.NodeStub(served.channel).NodeGetInfo(pb.NodeGetInfoRequest())
    assert info.max_volumes_per_node == 3


def test_a_runtime_attach_limit_is_also_node_get_info_max_volumes_per_node(
    served: ServedDriver,
) -> None:
    shown = json.loads(ok(served.run("limits", "--attach-limit", "4", "--json")))

    info = pb_grpc.NodeStub(served.channel).NodeGetInfo(pb.NodeGetInfoRequest())
    assert shown == {"max_volumes_per_node": 4, "attach_limit": 4}
    assert info.max_volumes_per_node == 4


def test_an_explicit_max_volumes_per_node_wins_over_the_attach_limit(
    served: ServedDriver,
) -> None:
    ran = served.run("limits", "--attach-limit", "4", "--max-volumes-per-node", "6", "--json")

    assert json.loads(ok(ran)) == {"max_volumes_per_node": 6, "attach_limit": 4}


def test_global_options_are_accepted_after_the_command(served: ServedDriver) -> None:
    ran = served.run("health", "--socket", str(served.admin_socket), "--json", socket=False)

    assert json.loads(ok(ran))["ready"] is True


def test_a_negative_size_is_refused_naming_it_and_the_pool_stays(served: ServedDriver) -> None:
    ran = served.run("pool", "resize", "spare", "-1Gi")

    assert ran.code == 2
    assert "size '-1Gi' is negative" in ran.err
    with served.admin() as admin:
        assert admin.pool("spare").total == 10 * GiB


def test_a_malformed_size_is_a_usage_error_naming_it_and_the_pool_stays(
    served: ServedDriver,
) -> None:
    ran = served.run("pool", "resize", "spare", "10Gb")

    assert ran.code == 2
    assert "size '10Gb' is not a quantity" in ran.err
    with served.admin() as admin:
        assert admin.pool("spare").total == 10 * GiB


@pytest.mark.parametrize("flag", ["--max-volumes-per-node", "--attach-limit"])
def test_a_negative_limit_is_a_usage_error_naming_the_flag(served: ServedDriver, flag: str) -> None:
    ran = served.run("limits", flag, "-3")

    assert ran.code == 2
    assert f"{flag}: -3 is negative" in ran.err
    assert json.loads(ok(served.run("--json", "limits"))) == {
        "max_volumes_per_node": 0,
        "attach_limit": 0,
    }


def test_neighbours_lists_none_and_refuses_a_program_it_is_not_told_of(
    served: ServedDriver,
) -> None:
    assert "admin.neighbours names no program" in ok(served.run("neighbours"))
    assert json.loads(ok(served.run("--json", "neighbours"))) == {"neighbours": []}

    refused = served.run("neighbours", "pause", "csi-attacher")
    assert refused.code == 1
    assert "'csi-attacher' is not a program csi-mock may pause" in refused.err
    usage = served.run("neighbours", "pause")
    assert usage.code == 2 and "pause and resume take a NAME" in usage.err


def test_refusals_print_sizes_as_the_tables_do(served: ServedDriver) -> None:
    too_much = served.run("pool", "consume", "spare", "20Gi")
    ok(served.run("pool", "consume", "spare", "4Gi"))
    too_small = served.run("pool", "resize", "spare", "3Gi")
    too_little = served.run("pool", "release", "spare", "5Gi")

    assert (too_much.code, too_small.code, too_little.code) == (1, 1, 1)
    assert "pool spare has 10Gi free, cannot consume 20Gi" in too_much.err
    assert "pool spare cannot shrink below 4Gi in use" in too_small.err
    assert "pool spare has only 4Gi consumed outside CSI, cannot release 5Gi" in too_little.err


def test_a_reader_that_stops_early_ends_ctl_quietly(served: ServedDriver) -> None:
    served.create("pvc-piped")
    argv = ["ctl", "--socket", str(served.admin_socket), "journal"]
    ctl = subprocess.Popen(
        [sys.executable, "-m", "csi_mock.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert ctl.stdout is not None and ctl.stderr is not None
    ctl.stdout.close()  # as `| head -1` does once it has its line: later writes fail
    err = ctl.stderr.read().decode()
    code = ctl.wait(timeout=30)

    assert (code, err) == (0, "")


def test_switches_show_and_set(served: ServedDriver) -> None:
    shown = ok(served.run("switches", "--node-expansion-required", "false")).splitlines()

    assert shown[0].split() == ["SWITCH", "VALUE"]
    assert ["node_expansion_required", "false"] in [line.split() for line in shown]
    assert json.loads(ok(served.run("--json", "switches")))["node_expansion_required"] is False


def test_switches_take_the_boolean_spellings_serve_takes(served: ServedDriver) -> None:
    off = json.loads(ok(served.run("--json", "switches", "--volume-stats", "f")))
    on = json.loads(ok(served.run("--json", "switches", "--volume-stats", "1")))

    assert (off["volume_stats"], on["volume_stats"]) == (False, True)


def test_a_switch_that_is_not_true_or_false_is_a_usage_error(served: ServedDriver) -> None:
    assert served.run("switches", "--volume-stats", "no").code == 2


def test_condition_set_show_and_clear(served: ServedDriver) -> None:
    reply = served.controller.CreateVolume(
        create_request("pvc-condition", GiB, requisite=["node-1"])
    )
    volume_id = reply.volume.volume_id

    set_ = json.loads(
        ok(served.run("condition", volume_id, "--abnormal", "--message", "hot", "--json"))
    )
    shown = ok(served.run("condition", volume_id)).splitlines()
    cleared = json.loads(ok(served.run("condition", volume_id, "--clear", "--json")))

    assert set_ == {"volume_id": volume_id, "abnormal": True, "message": "hot"}
    assert shown[1].split() == [volume_id, "abnormal", "hot"]
    assert cleared == {"volume_id": volume_id, "abnormal": False, "message": "healthy"}


def test_a_condition_of_an_unknown_volume_exits_1_naming_volume_id(served: ServedDriver) -> None:
    result = served.run("condition", "no-such-volume", "--abnormal")

    assert result.code == 1
    assert "(field: volume_id)" in result.err


def test_volumes_lists_every_volume_in_creation_order(served: ServedDriver) -> None:
    for index in range(3):
        served.create(f"pvc-listed-{index}")

    lines = ok(served.run("volumes")).splitlines()

    ours = [line.split() for line in lines[1:] if "pvc-listed-" in line]
    assert [row[1] for row in ours] == ["pvc-listed-0", "pvc-listed-1", "pvc-listed-2"]
    assert all(row[5] == "1Gi" for row in ours)
    assert lines[0].split()[:3] == ["SEQ", "NAME", "ID"]


def test_journal_where_selects_records_by_a_field_path(served: ServedDriver) -> None:
    served.create("pvc-where-a")
    served.create("pvc-where-b")

    out = ok(served.run("journal", "--where", "name=pvc-where-b", "--json"))

    assert [r["request"]["name"] for r in json.loads(out)] == ["pvc-where-b"]


def test_journal_and_health_have_readable_tables(served: ServedDriver) -> None:
    served.create("pvc-journaled")

    lines = ok(served.run("journal", "--volume", "pvc-journaled")).splitlines()

    assert lines[0].split() == [
        "SEQ",
        "TIME",
        "METHOD",
        "CODE",
        "MS",
        "FAULT",
        "VOLUME",
        "NODE",
        "MESSAGE",
    ]
    assert lines[1].split()[2:4] == ["CreateVolume", "OK"]
    assert ok(served.run("health")).strip() == "ready"


def test_tcp_needs_the_token_which_ctl_reads_from_a_file(served: ServedDriver) -> None:
    url = served.tcp_url()

    with_token = served.run(
        "--url", url, "--token-file", str(served.token_file), "health", socket=False
    )
    without = served.run("--url", url, "health", socket=False)

    assert (with_token.code, with_token.out.strip()) == (0, "ready")
    assert without.code == 1
    assert "bearer token is required" in without.err


def test_the_sync_client_reports_a_refusal_as_admin_error(served: ServedDriver) -> None:
    with served.admin() as admin, pytest.raises(AdminError) as raised:
        admin.resize_pool("nosuch", "1Gi")

    assert (raised.value.status, raised.value.field) == (404, "name")


def test_sigterm_stops_the_driver_and_removes_both_sockets(tmp_path: Path) -> None:
    with serving(tmp_path) as driver:
        assert driver.stop() == 0

    assert not driver.admin_socket.exists()
    assert not driver.csi_socket.exists()
    assert "shutting down" in driver.log.read_text()


def test_a_registering_driver_shows_the_kubelets_verdict_and_unregisters_on_sigterm(
    tmp_path: Path, short_tmp_path: Path
) -> None:
    registry = short_tmp_path / "plugins_registry"
    socket_path = registry / "csi-mock.example-reg.sock"
    with serving(tmp_path, plugins_registry=registry) as driver:
        assert socket_path.is_socket()
        with grpc.insecure_channel(f"unix://{socket_path}") as channel:
            RegistrationStub(channel).NotifyRegistrationStatus(
                RegistrationStatus(plugin_registered=False, error="CSINode update failed")
            )
        health = ok(driver.run("health"))
        assert driver.stop() == 0

    assert health.splitlines() == [
        "ready",
        f"kubelet registration ({socket_path}): refused: CSINode update failed",
    ]
    assert not socket_path.exists()
    assert "the kubelet did not register csi-mock.example: CSINode update failed" in (
        driver.log.read_text()
    )


# -- without a driver --------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["ctl", "fault", "add", "--code", "ABORTED"],
        ["ctl", "fault", "add", "--method", "CreateVolume", "--override", "no-equals-sign"],
        ["ctl", "fault", "add", "--method", "CreateVolume", "--times", "one"],
        ["ctl", "--socket", "/x.sock", "--url", "http://127.0.0.1:1", "health"],
        ["ctl", "--socket", "/x.sock", "health", "--url", "http://127.0.0.1:1"],
        ["ctl", "--token", "t" * 16, "health", "--token-file", "/x"],
        ["ctl", "capacity", "melt"],
        ["ctl", "journal", "--since", "yesterday"],
        ["ctl", "journal", "--where", "volume-id=x"],
        ["ctl", "journal", "--where", "volume_id"],
        ["ctl", "fault", "add", "--method", "CreateVolume", "--delay", "2 seconds"],
        ["ctl", "fault", "add", "--method", "CreateVolume", "--delay", "-1s"],
        ["ctl", "--timeout", "soon", "health"],
        ["ctl"],
    ],
)
def test_usage_errors_exit_2(argv: list[str]) -> None:
    ran = run_main(*argv)

    assert ran.code == 2
    assert ran.err


def test_fault_add_has_an_option_for_every_field_of_a_rule() -> None:
    args = build_parser().parse_args(["ctl", "fault", "add", "--method", "CreateVolume"])

    assert set(FaultSpec.__optional_keys__) - {"error"} <= set(vars(args))


def test_a_message_without_a_code_is_a_usage_error(tmp_path: Path) -> None:
    argv = ["ctl", "--socket", str(tmp_path / "x.sock"), "fault", "add"]
    ran = run_main(*argv, "--method", "CreateVolume", "--message", "m")

    assert ran.code == 2
    assert "--message needs --code" in ran.err


def test_an_unreachable_socket_exits_1_naming_it(tmp_path: Path) -> None:
    ran = run_main("ctl", "--socket", str(tmp_path / "absent.sock"), "health")

    assert ran.code == 1
    assert f"cannot reach the admin API at unix://{tmp_path}/absent.sock" in ran.err


def test_the_socket_comes_from_the_environment_when_not_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CSI_MOCK_ADMIN_SOCKET", str(tmp_path / "env.sock"))

    ran = run_main("ctl", "health")

    assert ran.code == 1
    assert f"unix://{tmp_path}/env.sock" in ran.err


def test_the_default_socket_is_the_drivers_default() -> None:
    default = validate_config({"mode": "controller"})

    assert default.admin_socket_path == DEFAULT_SOCKET


def test_tables_align_every_column_on_its_widest_cell() -> None:
    assert table(["A", "BB", "C"], [["xxx", "y", "z"], ["", "", ""]]) == (
        "A    BB  C\nxxx  y   z\n"
    )


def test_reset_while_a_volume_exists_exits_1_naming_it_and_changes_nothing(
    served: ServedDriver,
) -> None:
    """The shared driver keeps its volumes, so only the refusal is shown here; a reset
    that succeeds is tests/control/test_reset.py's."""
    served.controller.CreateVolume(
        pb.CreateVolumeRequest(
            name="pvc-left-for-reset",
            volume_capabilities=[
                pb.VolumeCapability(
                    mount=pb.VolumeCapability.MountVolume(),
                    access_mode=pb.VolumeCapability.AccessMode(
                        mode=pb.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
                    ),
                )
            ],
        )
    )
    ok(served.run("limits", "--max-volumes-per-node", "3"))

    refused = served.run("reset")

    assert refused.code == 1
    assert "volumes" in refused.err and "nothing was reset" in refused.err
    assert json.loads(ok(served.run("--json", "limits")))["max_volumes_per_node"] == 3
    ok(served.run("limits", "--max-volumes-per-node", "0"))


def test_volume_and_storage_health_set_show_and_clear(served: ServedDriver) -> None:
    reply = served.controller.CreateVolume(create_request("pvc-health", GiB, requisite=["node-1"]))
    volume_id = reply.volume.volume_id
    condition = "INACCESSIBLE:TargetGone:lost it"

    set_ = json.loads(
        ok(served.run("volume-health", volume_id, "--condition", condition, "--json"))
    )
    shown = ok(served.run("volume-health", volume_id)).splitlines()
    cleared = json.loads(ok(served.run("volume-health", volume_id, "--clear", "--json")))
    backend = json.loads(
        ok(served.run("storage-health", "--condition", "STORAGE_DEGRADED:Slow", "--json"))
    )

    entry = {"status": "INACCESSIBLE", "reason": "TargetGone", "message": "lost it"}
    assert set_ == {"volume_id": volume_id, "entries": [entry], "set": True}
    assert shown[1].split()[:3] == [volume_id, "INACCESSIBLE", "TargetGone"]
    assert cleared == {"volume_id": volume_id, "entries": [], "set": False}
    assert backend["entries"] == [{"status": "STORAGE_DEGRADED", "reason": "Slow", "message": ""}]


def test_a_bad_health_condition_is_refused_naming_it(served: ServedDriver) -> None:
    malformed = served.run("volume-health", "any-volume", "--condition", "INACCESSIBLE")
    unknown = served.run("storage-health", "--condition", "ON_FIRE:Hot")

    assert malformed.code == 2 and "STATUS:Reason" in malformed.err
    assert unknown.code == 1 and "entries[0].status" in unknown.err
