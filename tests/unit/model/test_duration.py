import math

import pytest

from csi_mock.model.duration import DurationError, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("300ms", 0.3),
        ("2s", 2.0),
        ("1m", 60.0),
        ("1m30s", 90.0),
        ("1h2m3.5s", 3723.5),
        ("1.5h", 5400.0),
        ("250us", 250e-6),
        ("250µs", 250e-6),
        ("10ns", 10e-9),
        ("-2s", -2.0),
        ("0", 0.0),
        ("1.5", 1.5),
        (" 2s ", 2.0),
        (".5s", 0.5),
    ],
)
def test_go_durations_and_plain_seconds_are_accepted(text: str, seconds: float) -> None:
    assert math.isclose(parse_duration(text), seconds)


@pytest.mark.parametrize("value", [3, 0.25])
def test_numbers_are_seconds(value: float) -> None:
    assert parse_duration(value) == value


@pytest.mark.parametrize(
    "text", ["", "s", "2x", "2 s", "1m 30s", "ms", "1s2", "--1s", "nan", "inf", "1e3s"]
)
def test_anything_else_is_refused_with_examples(text: str) -> None:
    with pytest.raises(DurationError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize("value", [True, float("nan"), float("inf")])
def test_booleans_and_non_finite_numbers_are_refused(value: float) -> None:
    with pytest.raises(DurationError):
        parse_duration(value)
