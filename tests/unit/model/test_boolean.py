"""One boolean parser for every command line: Go's strconv.ParseBool spellings."""

import pytest

from csi_mock.model.boolean import BooleanError, parse_bool


@pytest.mark.parametrize("text", ["1", "t", "T", "TRUE", "true", "True"])
def test_the_true_spellings_of_go_are_true(text: str) -> None:
    assert parse_bool(text) is True


@pytest.mark.parametrize("text", ["0", "f", "F", "FALSE", "false", "False"])
def test_the_false_spellings_of_go_are_false(text: str) -> None:
    assert parse_bool(text) is False


@pytest.mark.parametrize("text", ["yes", "no", "on", "tRUE", " true", "2", ""])
def test_anything_else_is_refused_naming_the_accepted_spellings(text: str) -> None:
    with pytest.raises(BooleanError, match=rf"^{text!r} is not a boolean \(true or false"):
        parse_bool(text)
