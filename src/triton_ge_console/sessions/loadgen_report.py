"""BenchRows as an operator reads them (a rich table) and as tools read them (CSV, JSON)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence

from rich.table import Table

from triton_ge_console.sessions.loadgen_types import ROW_FIELDS, BenchRow, Progress

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


def rows_to_json(rows: Sequence[BenchRow]) -> str:
    """A JSON list with one object per step."""
    return json.dumps([row.to_dict() for row in rows], indent=2)


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
