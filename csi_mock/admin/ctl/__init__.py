"""`csi-mock ctl`: the admin API from the command line.

Readable tables by default, `--json` for machines. Exit codes: 0 done, 1 refused by
the API or not reachable (the API's message, naming the field, on stderr), 2 usage.
The command line is `parser`, what each command does `commands`, how it prints
`render`, and connecting and exiting `run`.

`csi-mock serve` builds the `ctl` parser too (one `csi-mock --help`), so nothing here
imports the admin client until a command runs: the names below are imported when
first used (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from csi_mock.lazy_names import lazy_names

if TYPE_CHECKING:  # what __getattr__ below imports on first use
    from csi_mock.admin.ctl.commands import Output as Output
    from csi_mock.admin.ctl.commands import UsageError as UsageError
    from csi_mock.admin.ctl.parser import DEFAULT_SOCKET as DEFAULT_SOCKET
    from csi_mock.admin.ctl.parser import SOCKET_ENV as SOCKET_ENV
    from csi_mock.admin.ctl.parser import TOKEN_ENV as TOKEN_ENV
    from csi_mock.admin.ctl.parser import add_ctl_parser as add_ctl_parser
    from csi_mock.admin.ctl.render import table as table
    from csi_mock.admin.ctl.run import run_ctl as run_ctl

_HOME = {
    "DEFAULT_SOCKET": "csi_mock.admin.ctl.parser",
    "SOCKET_ENV": "csi_mock.admin.ctl.parser",
    "TOKEN_ENV": "csi_mock.admin.ctl.parser",
    "Output": "csi_mock.admin.ctl.commands",
    "UsageError": "csi_mock.admin.ctl.commands",
    "add_ctl_parser": "csi_mock.admin.ctl.parser",
    "run_ctl": "csi_mock.admin.ctl.run",
    "table": "csi_mock.admin.ctl.render",
}

__all__ = sorted(_HOME)


__getattr__, __dir__ = lazy_names(__name__, _HOME)
