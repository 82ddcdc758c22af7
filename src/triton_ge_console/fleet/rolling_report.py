"""`ge-console reload MODEL --fleet`: the rolling reload, a line per server as it goes, then who runs what."""

from __future__ import annotations

import argparse

from triton_ge_console.arg_types import error_line
from triton_ge_console.errors import InputError
from triton_ge_console.fleet.rolling import rolling_reload
from triton_ge_console.fleet.status import running_records
from triton_ge_console.sessions.server.registry import Registry


def run_rolling_reload(args: argparse.Namespace) -> int:
    """Roll MODEL over every running session; exit code 1 when a server failed (the roll stopped there)."""
    if args.changed or args.session:
        raise InputError("reload --fleet takes MODEL only (not --changed or --session)")
    records = running_records(Registry())
    if not records:
        raise InputError("no running sessions (start one with: ge-console up SPEC)")
    result = rolling_reload(records, args.model, lambda line: print(line, flush=True), config=args.config)
    print(f"{result.model} on the fleet:")
    for line in result.server_lines():
        print(f"  {line}")
    if not any(s.outcome in ("reloaded", "failed") for s in result.servers):
        return error_line(f"no running session has {args.model} loaded")
    return 0 if result.ok else 1
