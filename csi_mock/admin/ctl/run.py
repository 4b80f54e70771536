"""Running a parsed `csi-mock ctl` command: connect, call, print, exit code."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from csi_mock.admin.client import AdminClient, AdminError
from csi_mock.admin.ctl.commands import Command, UsageError
from csi_mock.admin.ctl.parser import DEFAULT_SOCKET, SOCKET_ENV, TOKEN_ENV


def run_ctl(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    try:
        client = _client(args, env)
    except UsageError as error:
        print(f"csi-mock ctl: {error}", file=sys.stderr)
        return 2
    command: Command = args.ctl_handler
    try:
        with client:
            output = command(client, args)
    except UsageError as error:
        print(f"csi-mock ctl: {error}", file=sys.stderr)
        return 2
    except AdminError as error:
        print(f"csi-mock ctl: {_explain(error)}", file=sys.stderr)
        return 1
    try:
        print(json.dumps(output.data, indent=2) if args.json else output.text, flush=True)
    except BrokenPipeError:
        # The reader stopped early (`ctl journal | head -1`): nothing is wrong, so no
        # traceback; stdout goes to /dev/null so the interpreter's final flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return output.exit_code


def _client(args: argparse.Namespace, env: Mapping[str, str]) -> AdminClient:
    # Each option is exclusive with its pair on one side of the command; across the
    # command argparse cannot see both.
    for first, second in (("socket", "url"), ("token", "token_file")):
        if getattr(args, first) is not None and getattr(args, second) is not None:
            raise UsageError(
                f"--{first.replace('_', '-')} and --{second.replace('_', '-')} exclude each other"
            )
    token = args.token or env.get(TOKEN_ENV)
    if args.token_file is not None:
        try:
            token = args.token_file.read_text().strip()
        except OSError as error:
            raise UsageError(f"--token-file {args.token_file}: {error.strerror}") from None
    if args.url:
        return AdminClient(url=args.url, token=token, timeout=args.timeout)
    socket = args.socket or Path(env.get(SOCKET_ENV) or DEFAULT_SOCKET)
    return AdminClient(socket, timeout=args.timeout)


def _explain(error: AdminError) -> str:
    if error.field and not error.message.startswith(f"{error.field}:"):
        return f"{error.message} (field: {error.field})"
    return error.message
