"""`ge-console`: one entry point; each area registers its own subcommands."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence

# Modules that define `register(subparsers)`; each subcommand sets `func(args) -> int` as its handler.
COMMAND_MODULES = (
    "triton_ge_console.repository.build_cli",  # init, build
    "triton_ge_console.repository.check_cli",  # validate, convert
    "triton_ge_console.backend_glue.backend_cli",  # backend install
    "triton_ge_console.sessions.session_cli",  # up, down, attach, ls, status, reload, watch
    "triton_ge_console.sessions.telemetry.devices_cli",  # devices
    "triton_ge_console.sessions.loadgen.bench_cli",  # bench
    "triton_ge_console.fleet.k8s_cli",  # k8s render
    "triton_ge_console.sessions.grafana_cli",  # grafana
    "triton_ge_console.console.console_cli",  # the console itself (default), demo, serve
)

Handler = Callable[[argparse.Namespace], int]

# Bare `ge-console` opens the console.
DEFAULT_COMMAND = "console"


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 0 meaning "pick a free one" (argparse names the option)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0-65535)")
    return port


def seconds(text: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text[:40]} must be a positive number of seconds")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, assembled from every area's commands."""
    parser = argparse.ArgumentParser(
        prog="ge-console",
        description="Build, launch, watch and control Triton Inference Server with CANN GE backends.",
    )
    parser.add_argument("--version", action="version", version=_version())
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        module.register(subparsers)
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


def _reader_went_away() -> int:
    """stdout was closed (`status | head -1`): stop quietly, and keep the exit flush from complaining."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 1


if __name__ == "__main__":
    sys.exit(main())
