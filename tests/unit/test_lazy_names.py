"""What `csi-mock serve` imports, and the packages that import their names on first use."""

import subprocess
import sys

import pytest

import csi_mock.admin
import csi_mock.admin.ctl

_CLIENT_ONLY = ("httpx", "rich", "click", "csi_mock.admin.client")


def test_serve_imports_neither_the_admin_client_nor_httpx() -> None:
    # What a driver start imports: the command line (with the ctl parser) and the server.
    code = (
        "import sys, csi_mock.cli, csi_mock.server\n"
        f"print(sorted(m for m in {_CLIENT_ONLY!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_admin_package_still_gives_every_public_name() -> None:
    from csi_mock.admin import AdminClient, AdminError, PoolView
    from csi_mock.admin.client import AdminClient as client_class

    assert AdminClient is client_class
    assert issubclass(AdminError, Exception)
    assert PoolView.__module__ == "csi_mock.admin.views"
    for name in csi_mock.admin.__all__:
        assert getattr(csi_mock.admin, name) is not None
    assert set(csi_mock.admin.__all__) <= set(dir(csi_mock.admin))


def test_ctl_package_gives_its_names_on_first_use() -> None:
    from csi_mock.admin.ctl import add_ctl_parser, run_ctl
    from csi_mock.admin.ctl.run import run_ctl as home

    assert run_ctl is home
    assert callable(add_ctl_parser)


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match=r"'csi_mock\.admin' has no attribute 'Nope'"):
        csi_mock.admin.Nope  # noqa: B018
    with pytest.raises(ImportError):
        from csi_mock.admin.ctl import nope  # noqa: F401
