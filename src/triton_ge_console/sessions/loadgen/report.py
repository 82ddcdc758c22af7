"""BenchRows as an operator reads them (a rich table) and as tools read them (CSV, JSON)."""

from __future__ import annotations

import csv
import io
import json
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from triton_ge_console.sessions.loadgen.types import ROW_FIELDS, BenchRow, Progress, RunContext

# (header, field, format) for the table; the CSV and JSON carry every field.
TABLE_COLUMNS = (
    ("req/s", "throughput_rps", "{:.1f}"),
    ("p50 ms", "p50_ms", "{:.2f}"),
    ("p90 ms", "p90_ms", "{:.2f}"),
    ("p95 ms", "p95_ms", "{:.2f}"),
    ("p99 ms", "p99_ms", "{:.2f}"),
    ("queue ms", "server_queue_ms", "{:.2f}"),
    ("input ms", "server_compute_input_ms", "{:.2f}"),
    ("infer ms", "server_compute_infer_ms", "{:.2f}"),
    ("output ms", "server_compute_output_ms", "{:.2f}"),
    ("errors", "errors", "{:d}"),
    ("rejected", "rejected", "{:d}"),
    ("timed out", "timed_out", "{:d}"),
    ("gen CPU", "client_cpu", "{:.0%}"),
)


# Client latency at least this many times what the server accounts for (queue + compute), and at least
# this many ms more: the time goes to the client or the network, so the figures measure them, not the model.
CLIENT_BOUND_RATIO = 2.0
CLIENT_BOUND_MIN_MS = 1.0


def bench_json(rows: Sequence[BenchRow], context: Mapping[str, Any] | None, warnings: Sequence[str]) -> str:
    """The run as JSON: its context (what it measured against), its warnings, one object per step."""
    return json.dumps({"context": dict(context or {}), "warnings": list(warnings),
                       "rows": [row.to_dict() for row in rows]}, indent=2)


def run_context_dict(context: RunContext | None, client_before: Mapping[str, Any],
                     client_after: Mapping[str, Any]) -> dict[str, Any]:
    """The run's context with the client machine's CPU and load before and after (None: not reached)."""
    facts = context.to_dict() if context is not None else {}
    return {**facts, "client": {"cpu": client_before["cpu"], "cores": client_before["cores"],
                                "load_average_before": client_before["load_average"],
                                "load_average_after": client_after["load_average"]}}


def client_facts() -> dict[str, Any]:
    """This machine's CPU model, logical cores and 1/5/15-minute load average (None where unknown)."""
    try:
        load: list[float] | None = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"cpu": _cpu_model(), "cores": os.cpu_count(), "load_average": load}


def _cpu_model() -> str | None:
    """The CPU's model name (Linux /proc/cpuinfo, else what platform says)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


def client_bound_warnings(rows: Sequence[BenchRow]) -> list[str]:
    """Steps whose client-side latency is far above the server's own: the client is the bottleneck."""
    warnings = []
    for row in rows:
        if row.avg_ms is None or row.server_queue_ms is None or row.server_compute_ms is None:
            continue
        server_ms = row.server_queue_ms + row.server_compute_ms
        if row.avg_ms >= CLIENT_BOUND_RATIO * server_ms and row.avg_ms - server_ms >= CLIENT_BOUND_MIN_MS:
            times = f"{row.avg_ms / server_ms:.1f}x" if server_ms > 0 else "far above"
            warnings.append(
                f"{level_text(row)}: client latency {row.avg_ms:.2f} ms is {times} the server's "
                f"{server_ms:.2f} ms (queue + compute): the client or the network is the bottleneck, not "
                f"the model (generator CPU {_cell(row.client_cpu, '{:.0%}')})")
    return warnings


def rows_to_csv(rows: Sequence[BenchRow]) -> str:
    """CSV with a header of every BenchRow field; missing figures are empty cells."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(ROW_FIELDS), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.to_dict().items()})
    return buffer.getvalue()


def rows_to_table(rows: Sequence[BenchRow], title: str | None = None) -> Table:
    """A rich table: one line per step, the level first, '-' for a figure the server did not give."""
    rate_mode = bool(rows) and rows[0].rate is not None
    table = Table(title=title, header_style="bold")
    table.add_column("rate" if rate_mode else "concurrency", justify="right")
    for header, _, _ in TABLE_COLUMNS:
        table.add_column(header, justify="right")
    table.add_column("stable", justify="center")
    for row in rows:
        level = f"{row.rate:g}/s" if row.rate is not None else str(row.concurrency)
        cells = [_cell(getattr(row, name), fmt) for _, name, fmt in TABLE_COLUMNS]
        table.add_row(level, *cells, "yes" if row.stable else "no")
    return table


def level_text(row: BenchRow) -> str:
    """'concurrency 4' or 'rate 200/s'."""
    return f"rate {row.rate:g}/s" if row.rate is not None else f"concurrency {row.concurrency}"


def _cell(value: float | int | None, fmt: str) -> str:
    """One formatted figure, '-' when missing."""
    return "-" if value is None else fmt.format(value)


def progress_line(progress: Progress) -> str:
    """One line an operator reads while the run goes on."""
    level = f"rate {progress.level:g}/s" if progress.mode == "rate" else f"concurrency {progress.level:g}"
    head = f"[{progress.step}/{progress.steps}] {level}"
    if progress.phase == "measuring" and progress.window_throughput_rps is not None:
        p50 = "-" if progress.window_p50_ms is None else f"{progress.window_p50_ms:.1f} ms"
        return (f"{head}: window {progress.window}/{progress.max_windows} "
                f"{progress.window_throughput_rps:.1f} req/s, p50 {p50}, errors {progress.errors}")
    if progress.phase == "step-done" and progress.row is not None:
        row = progress.row
        p50 = "-" if row.p50_ms is None else f"{row.p50_ms:.1f} ms"
        state = "stable" if row.stable else "not stable"
        return f"{head}: {row.throughput_rps:.1f} req/s, p50 {p50} after {row.windows} windows ({state})"
    return f"{head}: {progress.phase}"
