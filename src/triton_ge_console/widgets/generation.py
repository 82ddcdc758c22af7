"""The token figures of a session's generate models: TTFT and ITL p50/p99 (over the last polls' window, or
since load, as the OVER column says), output tokens/s, running and waiting sequences, KV-cache use,
requests refused as the client's mistakes (counted apart from failures); hidden while the session has no
generate model."""

from __future__ import annotations

import html
from collections.abc import Mapping

import ipywidgets as w

from triton_ge_console.display import MISSING, kv_text, memory, number, threshold_level, window_label
from triton_ge_console.sessions.observe.generation import GenerationFigures
from triton_ge_console.sessions.observe.history import newest_versions
from triton_ge_console.sessions.observe.snapshot import ModelSnapshot, ServerSnapshot

GENERATION_COLUMNS = ("MODEL", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms", "OVER", "OUT TOK/S",
                      "RUNNING", "WAITING", "KV", "REFUSED")


# a column's spec threshold (the console's colours: red at or over, orange from 75 %)
THRESHOLD_COLUMNS = {"TTFT p99 ms": "ttft_p99_ms", "ITL p99 ms": "itl_p99_ms", "KV": "kv_cache_share"}
LEVEL_STYLES = {"over": "color:firebrick; font-weight:bold", "near": "color:darkorange"}


def generation_levels(figures: GenerationFigures, limits: Mapping[str, float]) -> dict[str, str]:
    """Each thresholded column's level against the spec's thresholds ("over", "near"; none left out)."""
    values = {"ttft_p99_ms": figures.ttft_p99_ms, "itl_p99_ms": figures.itl_p99_ms,
              "kv_cache_share": figures.kv_cache_share}
    levels = {column: threshold_level(values[key], limits.get(key))
              for column, key in THRESHOLD_COLUMNS.items()}
    return {column: level for column, level in levels.items() if level}


def generation_cells(name: str, figures: GenerationFigures) -> dict[str, str]:
    """One generate model's row as text (— where the server reported nothing)."""
    kv = memory(figures.kv_cache_bytes, figures.kv_cache_capacity_bytes)
    share = figures.kv_cache_share
    return {
        "MODEL": name,
        "TTFT p50 ms": number(figures.ttft_p50_ms, 2), "TTFT p99 ms": number(figures.ttft_p99_ms, 2),
        "ITL p50 ms": number(figures.itl_p50_ms, 2), "ITL p99 ms": number(figures.itl_p99_ms, 2),
        "OVER": window_label(figures.window_s),  # the span the percentiles cover
        "OUT TOK/S": number(figures.output_tokens_per_s, 1),
        "RUNNING": number(figures.running), "WAITING": number(figures.waiting),
        "KV": kv if share is None else kv_text(kv, share),
        "REFUSED": number(figures.rejected_total),  # the glue's count since load (engines keep none: —)
    }


def generate_models(snapshot: ServerSnapshot) -> list[ModelSnapshot]:
    """The models with token figures, one row per name: its newest version's (the one the charts and
    `ServerSnapshot.model` follow; every version has figures of its own)."""
    return [m for m in newest_versions(snapshot.models).values() if m.generation is not None]


def generation_table(rows: dict[str, dict[str, str]], levels: Mapping[str, Mapping[str, str]]) -> str:
    """The rows as an HTML table, figures past their threshold coloured (also what a closed dashboard
    keeps)."""
    head = "".join(f"<th style='padding:0 6px'>{html.escape(c)}</th>" for c in GENERATION_COLUMNS)
    body = "".join("<tr>" + "".join(_cell(cells.get(c, MISSING), levels.get(name, {}).get(c, ""))
                                    for c in GENERATION_COLUMNS) + "</tr>" for name, cells in rows.items())
    return (f"<b>Generation</b><div style='overflow-x:auto'><table style='font-family:monospace; "
            f"font-size:12px'><tr>{head}</tr>{body}</table></div>")


def _cell(text: str, level: str) -> str:
    """One table cell, coloured by its threshold level."""
    style = LEVEL_STYLES.get(level, "")
    return f"<td style='padding:0 6px; {style}'>{html.escape(text)}</td>"


class GenerationPanel:
    """The generate models' table, shown only while there is one."""

    def __init__(self, thresholds: Mapping[str, Mapping[str, float]] | None = None) -> None:
        self.thresholds = dict(thresholds or {})  # per model, the spec's console thresholds
        self.table = w.HTML("")
        self.box = w.VBox([self.table], layout=w.Layout(display="none"))
        self.rows: dict[str, dict[str, str]] = {}
        self.levels: dict[str, dict[str, str]] = {}  # per model, its columns past or near a threshold

    def update(self, snapshot: ServerSnapshot) -> None:
        """Show the snapshot's generate models (and hide the panel when there is none)."""
        shown = [(m.name, m.generation) for m in generate_models(snapshot) if m.generation is not None]
        self.rows = {name: generation_cells(name, figures) for name, figures in shown}
        self.levels = {name: generation_levels(figures, self.thresholds.get(name, {}))
                       for name, figures in shown}
        self.table.value = self.static_html()
        self.box.layout.display = None if self.rows else "none"

    def static_html(self) -> str:
        """The last rows, for the closed dashboard's copy ("" when there was no generate model)."""
        return generation_table(self.rows, self.levels) if self.rows else ""
