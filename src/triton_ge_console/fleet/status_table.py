"""`ge-console status --all [--json]`: the fleet's rows, as JSON or a table."""

from __future__ import annotations

import argparse
import json

from triton_ge_console.display import MISSING, gib, number, percent
from triton_ge_console.errors import InputError
from triton_ge_console.fleet.status import FleetRow, fleet_rows, running_records
from triton_ge_console.sessions.server.registry import Registry
from triton_ge_console.triton_terms import SERVER_LIVE, SERVER_READY

HEADINGS = (
    "NAME", "WHERE", "HEALTH", "SERVER", "MODELS r/f/t", "REQ/S", "P99 ms", "NPU mean/max", "NPU MEM GiB",
)


def run_status_all(args: argparse.Namespace) -> int:
    """Print every running session's row; exit code 1 when any server did not answer."""
    if args.name:
        raise InputError("status --all takes no NAME")
    if args.workers < 1 or args.interval < 0:
        raise InputError("--workers must be >= 1 and --interval >= 0")
    rows = fleet_rows(running_records(Registry()), interval_s=args.interval, max_workers=args.workers)
    if args.json:
        print(json.dumps([row.to_dict() for row in rows], indent=2))
    elif not rows:
        print("no running sessions (start one with: ge-console up SPEC)")
    else:
        _print_table([_cells(row) for row in rows])
    return 0 if all(row.health in (SERVER_READY, SERVER_LIVE) for row in rows) else 1


def _cells(row: FleetRow) -> tuple[str, ...]:
    """A row as table cells; missing figures read as the missing mark."""
    models = "/".join(number(n) for n in (row.models_ready, row.models_failing, row.models_total))
    return (
        row.name, row.where, row.health, row.server or MISSING, models,
        number(row.requests_per_s), number(row.worst_p99_ms),
        f"{percent(row.npu_util_mean)}/{percent(row.npu_util_max)}",
        f"{gib(row.npu_memory_used_bytes)}/{gib(row.npu_memory_total_bytes)}",
    )


def _print_table(rows: list[tuple[str, ...]]) -> None:
    """Left-aligned columns as wide as their widest cell."""
    widths = [max(len(cell) for cell in column) for column in zip(HEADINGS, *rows, strict=False)]
    for cells in (HEADINGS, *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=False)).rstrip())
