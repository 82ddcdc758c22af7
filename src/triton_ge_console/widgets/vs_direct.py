"""What Triton costs a model (bench --vs-direct) as HTML: the seed's tables, kept by a saved notebook."""

from __future__ import annotations

import html

from triton_ge_console.sessions.loadgen import vs_direct_report as cells
from triton_ge_console.sessions.loadgen.vs_direct import VsDirectReport
from triton_ge_console.widgets.fleet import table_html

RIGHT = "text-align:right"


def _table(title: str, table_cells: cells.Cells) -> str:
    """One titled table, figures right-aligned."""
    headers, rows = table_cells
    values = [dict(zip(headers, row, strict=True)) for row in rows]
    styles = [dict.fromkeys(headers, RIGHT) for _ in rows]
    return f"<b>{html.escape(title)}</b>{table_html(headers, values, styles)}"


def vs_direct_html(report: VsDirectReport) -> str:
    """Latency and maximum throughput, direct and through Triton, then the host's notes (the CLI's tables)."""
    notes = "".join(f"<div><i>note: {html.escape(note)}</i></div>" for note in report.notes)
    return ("<div class='ge-vs-direct' style='overflow-x:auto'>"
            f"{_table(cells.latency_title(report), cells.latency_cells(report))}<br>"
            f"{_table(cells.throughput_title(report), cells.throughput_cells(report))}{notes}</div>")
