"""`bench --vs-direct`'s report: the seed's table (direct vs through Triton) for operators, JSON for tools."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from triton_ge_console.sessions.loadgen.rounds import Spread
from triton_ge_console.sessions.loadgen.vs_direct import VsDirectReport

PROTOCOL_LABELS = {"grpc": "gRPC", "http": "HTTP"}


def vs_direct_json(report: VsDirectReport, context: Mapping[str, Any]) -> str:
    """The report as JSON: every figure as median, low, high over the rounds, with the run's context."""
    data = dataclasses.asdict(report)
    data["input_shapes"] = {name: list(dims) for name, dims in report.input_shapes.items()}
    return json.dumps({"context": dict(context), **data}, indent=2)


def _ms(spread: Spread) -> str:
    """A latency median."""
    return f"{spread.median:.2f}"


def _added(spread: Spread) -> str:
    """What Triton adds: the median and the rounds' range, signed; unresolved when a round saw none."""
    return spread.cost_text("{:+.2f}", "…")


def _ranged(spread: Spread, fmt: str) -> str:
    """A median with its range."""
    return spread.text(fmt)


Cells = tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]  # headers, rows


def latency_title(report: VsDirectReport) -> str:
    """What the latency table shows, and the inputs it was measured with."""
    shapes = ", ".join(f"{name} {list(dims)}" for name, dims in report.input_shapes.items())
    return (f"{report.model}: latency ms, p50 (p99), median of {report.rounds} round(s); "
            f"inputs at batch 1: {shapes}; {delay_text(report.queue_delay_us)}")


def delay_text(delay_us: int | None) -> str:
    """The batching delay the model is served with, which a lone request through Triton may wait."""
    if delay_us is None:
        return "no dynamic batching"
    if delay_us == 0:
        return "dynamic batching, no queue delay"
    return f"dynamic batching delay {delay_us} µs (in each latency through Triton; a lone request waits it)"


def latency_cells(report: VsDirectReport) -> Cells:
    """One line per batch size: p50 (p99) direct and over each protocol, and what Triton adds to the p50."""
    protocols = list(dict.fromkeys(row.protocol for row in report.latency))
    headers = ["batch", f"direct ({report.executor})"]
    for protocol in protocols:
        label = PROTOCOL_LABELS.get(protocol, protocol)
        headers += [f"through Triton, {label}", f"Triton adds, {label} (range)"]
    rows = []
    for batch in dict.fromkeys(row.batch for row in report.latency):
        by_protocol = {row.protocol: row for row in report.latency if row.batch == batch}
        first = by_protocol[protocols[0]]
        cells = [str(batch), f"{_ms(first.direct_p50_ms)} ({_ms(first.direct_p99_ms)})"]
        for protocol in protocols:
            row = by_protocol[protocol]
            cells += [f"{_ms(row.triton_p50_ms)} ({_ms(row.triton_p99_ms)})", _added(row.added_p50_ms)]
        rows.append(tuple(cells))
    return tuple(headers), tuple(rows)


def throughput_title(report: VsDirectReport) -> str:
    """What the throughput table compares: executors directly, requests in flight through Triton."""
    batch = report.throughput[0].batch if report.throughput else 1
    return (f"maximum throughput, req/s at batch {batch}: direct with {report.instances} "
            f"executor(s) (one per served instance), through Triton with {report.concurrency} in flight")


def throughput_cells(report: VsDirectReport) -> Cells:
    """Maximum throughput each way and through Triton ÷ direct, with the rounds' ranges."""
    rows = report.throughput
    headers = ["direct"]
    for row in rows:
        label = PROTOCOL_LABELS.get(row.protocol, row.protocol)
        headers += [f"through Triton, {label}", f"{label} ÷ direct"]
    if not rows:
        return tuple(headers), ()
    cells = [_ranged(rows[0].direct_rps, "{:.1f}")]
    for row in rows:
        cells += [_ranged(row.triton_rps, "{:.1f}"), _ranged(row.ratio, "{:.2f}×")]
    return tuple(headers), (tuple(cells),)


def _rich_table(title: str, cells: Cells) -> Table:
    """Headers and rows as a Rich table, figures right-aligned."""
    headers, rows = cells
    table = Table(title=title, header_style="bold")
    for header in headers:
        table.add_column(header, justify="right")
    for row in rows:
        table.add_row(*row)
    return table


def latency_table(report: VsDirectReport) -> Table:
    """The latency cells as a Rich table."""
    return _rich_table(latency_title(report), latency_cells(report))


def throughput_table(report: VsDirectReport) -> Table:
    """The throughput cells as a Rich table."""
    return _rich_table(throughput_title(report), throughput_cells(report))


def vs_direct_renderable(report: VsDirectReport) -> Group:
    """Both tables and what they mean on this host."""
    notes = [Text(f"note: {note}") for note in report.notes]
    return Group(latency_table(report), throughput_table(report), *notes)
