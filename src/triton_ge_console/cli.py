"""`ge-console`: one entry point; each area registers its own subcommands.

The convention, the same in every area: a `<topic>_cli.py` module has `register(subparsers)`, which adds its
verbs and sets `func=` to a handler of that same module; this module lists every `register`. At its top a
*_cli module imports only the standard library, `arg_types` and what the parser itself needs (choices,
defaults); anything else (onnx, tritonclient, the UI, a `handlers` module) is imported inside the handler
that needs it, so `ge-console --help` stays fast. A handler raises a user error (bad input, a session not
found, a server that refused) as a `GeConsoleError` (errors.py) and `_run` reports it, one line and exit code
1, for every verb; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from triton_ge_console.arg_types import Handler, UsageError, error_line
from triton_ge_console.backend_glue import backend_cli
from triton_ge_console.console import console_cli
from triton_ge_console.doctor import doctor_cli
from triton_ge_console.errors import GeConsoleError
from triton_ge_console.fleet import fleet_cli, k8s_cli
from triton_ge_console.repository import build_cli, check_cli
from triton_ge_console.sessions import session_cli
from triton_ge_console.sessions.act import act_cli
from triton_ge_console.sessions.frontdoor import openai_cli
from triton_ge_console.sessions.loadgen import bench_cli
from triton_ge_console.sessions.observe import grafana_cli
from triton_ge_console.sessions.observe.telemetry import devices_cli

# Every area's `register`, in help order.
REGISTRATIONS = (
    build_cli.register,  # init, build
    check_cli.register,  # validate, convert
    backend_cli.register,  # backend install
    session_cli.register,  # up, down, restart, attach, ls, status
    act_cli.register,  # load, unload, reload, watch
    fleet_cli.register,  # their fleet options: status --all, reload --fleet, attach k8s:...
    devices_cli.register,  # devices
    doctor_cli.register,  # doctor
    bench_cli.register,  # bench
    openai_cli.register,  # openai (the OpenAI-compatible front door)
    k8s_cli.register,  # k8s render
    grafana_cli.register,  # grafana
    console_cli.register,  # the console itself (default), demo, serve
)

# Bare `ge-console` opens the console.
DEFAULT_COMMAND = "console"


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, assembled from every area's commands."""
    parser = argparse.ArgumentParser(
        prog="ge-console",
        description="Build, launch, watch and control Triton Inference Server with CANN GE backends.",
    )
    parser.add_argument("--version", action="version", version=_version())
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in REGISTRATIONS:
        register(subparsers)
    parser.set_defaults(known_commands=frozenset(subparsers.choices))
    return parser


def _version() -> str:
    """Package version string."""
    from triton_ge_console import __version__

    return f"ge-console {__version__}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; exit codes: 0 ok, 1 failure, 2 usage."""
    try:
        code = _run(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _reader_went_away()


def _run(arguments: list[str]) -> int:
    """Parse and dispatch to the command's handler."""
    parser = build_parser()
    args = parser.parse_args(arguments)
    handler: Handler | None = getattr(args, "func", None)
    if handler is None:
        if not arguments and DEFAULT_COMMAND in args.known_commands:
            return _run([DEFAULT_COMMAND])
        parser.print_help()
        return 2
    try:
        return handler(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise  # stdout closed by the reader (`status | head -1`): main ends quietly
    except UsageError as exc:  # which session, which options: the user's call to make
        return error_line(str(exc).splitlines()[0], code=2)
    except GeConsoleError as exc:  # what the user can act on; anything else is a bug and keeps its traceback
        return error_line(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


def _reader_went_away() -> int:
    """stdout was closed (`status | head -1`): stop quietly, and keep the exit flush from complaining."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 1


if __name__ == "__main__":
    sys.exit(main())
