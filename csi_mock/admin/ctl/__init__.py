"""`csi-mock ctl`: the admin API from the command line.

Readable tables by default, `--json` for machines. Exit codes: 0 done, 1 refused by
the API or not reachable (the API's message, naming the field, on stderr), 2 usage.
The command line is `parser`, what each command does `commands`, how it prints
`render`, and connecting and exiting `run`.
"""

from csi_mock.admin.ctl.commands import Output, UsageError
from csi_mock.admin.ctl.parser import DEFAULT_SOCKET, SOCKET_ENV, TOKEN_ENV, add_ctl_parser
from csi_mock.admin.ctl.render import table
from csi_mock.admin.ctl.run import run_ctl

__all__ = [
    "DEFAULT_SOCKET",
    "SOCKET_ENV",
    "TOKEN_ENV",
    "Output",
    "UsageError",
    "add_ctl_parser",
    "run_ctl",
    "table",
]
