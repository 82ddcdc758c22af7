"""`ge-console`: one entry point; each area registers its own subcommands."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

# Modules that define `register(subparsers)`; each subcommand sets `func(args) -> int` as its handler.
COMMAND_MODULES = (
    "triton_ge_console.repository.commands",  # init, build
    "triton_ge_console.repository.check_commands",  # validate, convert
    "triton_ge_console.backend_glue.commands",  # backend install
    "triton_ge_console.sessions.commands",  # up, down, attach, ls, status, reload, watch
    "triton_ge_console.sessions.telemetry_commands",  # devices
    "triton_ge_console.sessions.bench_commands",  # bench
    "triton_ge_console.sessions.grafana_commands",  # grafana
    "triton_ge_console.console.commands",  # the console itself (default), demo, serve
)

Handler = Callable[[argparse.Namespace], int]

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
    parser = build_parser()
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(arguments)
    handler: Handler | None = getattr(args, "func", None)
    if handler is None:
        if not arguments and DEFAULT_COMMAND in args.known_commands:
            return main([DEFAULT_COMMAND])
        parser.print_help()
        return 2
    try:
        return handler(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
