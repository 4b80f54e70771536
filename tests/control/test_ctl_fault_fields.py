"""`csi-mock ctl fault add` options for request conditions, reply paths and rescue:
what the command line sends, and what it refuses before sending anything."""

from __future__ import annotations

import argparse
from typing import Any, cast

import pytest

from csi_mock.admin import AdminClient, FaultRuleView
from csi_mock.admin.ctl.commands import UsageError, fault_add
from csi_mock.cli import build_parser


class RecordingClient:
    """Stands in for AdminClient: keeps what add_fault was given."""

    def __init__(self) -> None:
        self.sent: dict[str, Any] = {}

    def add_fault(self, method: str, **spec: Any) -> FaultRuleView:
        self.sent = {"method": method, **{k: v for k, v in spec.items() if v is not None}}
        return FaultRuleView(id="rule-1", method=method)


def sent(*options: str) -> dict[str, Any]:
    args = build_parser().parse_args(["ctl", "fault", "add", "--method", "CreateVolume", *options])
    client = RecordingClient()
    fault_add(cast(AdminClient, client), args)
    return client.sent


def parse(*options: str) -> argparse.Namespace:
    return build_parser().parse_args(["ctl", "fault", "add", "--method", "CreateVolume", *options])


@pytest.mark.parametrize(
    ("option", "where"),
    [
        ("capacity_range.required_bytes>1Gi", {"capacity_range.required_bytes": ">1Gi"}),
        ("capacity_range.required_bytes>=1Gi", {"capacity_range.required_bytes": ">=1Gi"}),
        ("capacity_range.required_bytes<10", {"capacity_range.required_bytes": "<10"}),
        ("capacity_range.required_bytes<=10", {"capacity_range.required_bytes": "<=10"}),
        ("capacity_range.required_bytes==0", {"capacity_range.required_bytes": "==0"}),
        ("name=pvc-*", {"name": "pvc-*"}),
        ('parameters["a=b"]=c=d', {'parameters["a=b"]': "c=d"}),
    ],
)
def test_where_takes_a_glob_or_a_comparison_after_the_path(
    option: str, where: dict[str, str]
) -> None:
    assert sent("--delay", "1s", "--where", option)["where"] == where


@pytest.mark.parametrize(
    ("option", "override"),
    [
        ("volume.capacity_bytes=5", {"volume.capacity_bytes": 5}),
        ("volume_condition.abnormal=true", {"volume_condition.abnormal": True}),
        ("volume_condition.message=on fire", {"volume_condition.message": "on fire"}),
        (
            'volume.accessible_topology=[{"segments": {"zone": "b"}}]',
            {"volume.accessible_topology": [{"segments": {"zone": "b"}}]},
        ),
        ('volume.volume_context["k=1"]=v', {'volume.volume_context["k=1"]': "v"}),
    ],
)
def test_override_takes_a_path_and_a_json_value(option: str, override: dict[str, Any]) -> None:
    assert sent("--override", option)["override"] == override


def test_rescue_sends_the_code_and_the_reply() -> None:
    rescue = sent("--rescue", "NOT_FOUND", "--reply", '{"volume": {"volume_id": "v"}}')["rescue"]

    assert rescue == {"code": "NOT_FOUND", "reply": {"volume": {"volume_id": "v"}}}


def test_rescue_any_sends_no_code() -> None:
    assert sent("--rescue", "any")["rescue"] == {"reply": {}}


def test_a_reply_without_rescue_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--reply needs --rescue"):
        sent("--reply", "{}")


@pytest.mark.parametrize(
    "options",
    [
        ["--where", "capacity_range.required_bytes"],
        ["--where", "capacity_range.required_bytes!5"],
        ["--where", "9name=x"],
        ["--override", "volume.capacity_bytes"],
        ["--reply", "[1]"],
        ["--reply", "{not json"],
    ],
)
def test_a_malformed_option_is_a_usage_error(
    options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(*options)

    assert exited.value.code == 2
    assert options[0] in capsys.readouterr().err
