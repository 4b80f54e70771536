"""The journal's configuration: admin.journal_requests and admin.journal_whole_size."""

from __future__ import annotations

from pathlib import Path

import pytest

from csi_mock.config import ConfigError, JournalRequests, validate_config
from csi_mock.driver import Driver


def test_by_default_the_journal_keeps_key_fields_only() -> None:
    admin = validate_config({"node": {"id": "n1"}}).admin

    assert admin.journal_requests is JournalRequests.KEYS
    assert (admin.journal_size, admin.journal_whole_size) == (10_000, 1_000)


def test_whole_requests_are_asked_for_by_name() -> None:
    data = {"node": {"id": "n1"}, "admin": {"journal_requests": "whole", "journal_whole_size": 50}}
    admin = validate_config(data).admin

    assert (admin.journal_requests, admin.journal_whole_size) == (JournalRequests.WHOLE, 50)


def test_an_unknown_journal_mode_names_its_key() -> None:
    with pytest.raises(ConfigError, match=r"admin\.journal_requests: .*'keys' or 'whole'"):
        validate_config({"node": {"id": "n1"}, "admin": {"journal_requests": "all"}})


def test_a_whole_size_of_zero_names_its_key() -> None:
    with pytest.raises(ConfigError, match=r"admin\.journal_whole_size: .*greater than or equal"):
        validate_config({"node": {"id": "n1"}, "admin": {"journal_whole_size": 0}})


def test_the_driver_builds_its_journal_from_the_configuration(tmp_path: Path) -> None:
    config = validate_config(
        {
            "node": {"id": "n1", "mount": "directory"},
            "endpoint": f"unix://{tmp_path}/csi.sock",
            "state_dir": str(tmp_path / "state"),
            "admin": {"journal_requests": "whole", "journal_whole_size": 7},
        }
    )
    driver = Driver.open(config)
    try:
        assert driver.journal.whole_messages is not None
        assert driver.journal.whole_capacity == 7
    finally:
        driver.close()
