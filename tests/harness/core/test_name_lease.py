"""A cluster name no other running session holds: the first free one of a series,
given back when released or when its process ends in any way."""

from __future__ import annotations

import secrets
import subprocess
import sys

import pytest

from csi_harness._internal.core import name_lease
from csi_harness._internal.core.name_lease import NoNameFree, lease_name


@pytest.fixture
def base() -> str:
    """A name of this test's own: real sessions on this host lease theirs meanwhile."""
    return "t-" + secrets.token_hex(4)


def test_a_second_holder_gets_the_next_name_and_a_released_name_is_taken_again(
    base: str,
) -> None:
    first, second = lease_name(base, "local"), lease_name(base, "local")
    assert (first.name, second.name) == (base, f"{base}-2")
    first.release()
    third = lease_name(base, "local")
    assert third.name == base
    for lease in (second, third):
        lease.release()


def test_scopes_do_not_collide(base: str) -> None:
    local, kind = lease_name(base, "local"), lease_name(base, "kind")
    assert local.name == kind.name == base
    local.release()
    kind.release()


def test_a_killed_holder_lets_go_of_its_name(base: str) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from csi_harness._internal.core.name_lease import lease_name\n"
            f"print(lease_name({base!r}, 'local').name, flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == base
        taken = lease_name(base, "local")
        assert taken.name == f"{base}-2"
        taken.release()
    finally:
        holder.kill()
        holder.wait()
    again = lease_name(base, "local")
    assert again.name == base
    again.release()


def test_when_every_name_is_held_the_user_is_told_to_name_the_cluster(
    base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(name_lease, "MAX_SESSIONS", 2)
    held = [lease_name(base, "local"), lease_name(base, "local")]
    with pytest.raises(NoNameFree, match="name the cluster yourself"):
        lease_name(base, "local")
    for lease in held:
        lease.release()
