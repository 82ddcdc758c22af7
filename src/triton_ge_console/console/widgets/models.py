"""The models table: one row per model version, filterable, sortable, thresholds coloured."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rich.text import Span, Text
from textual.widgets import DataTable

from triton_ge_console.console import format as fmt
from triton_ge_console.sessions.snapshot import ModelSnapshot

Thresholds = Mapping[str, Mapping[str, float]]  # model -> {"queue_depth": 8, "p99_ms": 50}

COLUMNS = ("MODEL", "VER", "STATE", "BACKEND", "QUEUE", "REQ/S", "INF/S", "BATCH", "P50 ms", "P99 ms",
           "FAIL", "MODE", "DEVICE")
WIDTHS = (22, 4, 12, 8, 6, 7, 7, 6, 8, 8, 5, 13, 10)
STATE_STYLES = {"READY": "green", "UNAVAILABLE": "bold red", "LOADING": "yellow", "UNLOADING": "yellow"}


@dataclass(frozen=True)
class SortKey:
    """A column the table can sort by; numbers sort largest first."""

    label: str
    key: Callable[[ModelSnapshot], object]
    descending: bool


def _num(value: float | int | None) -> float:
    """Missing numbers sort last."""
    return float("-inf") if value is None else float(value)


SORT_KEYS = (
    SortKey("name", lambda m: (m.name, m.version), False),
    SortKey("queue", lambda m: _num(m.queue_depth), True),
    SortKey("req/s", lambda m: _num(m.request_rate), True),
    SortKey("inf/s", lambda m: _num(m.inference_rate), True),
    SortKey("p99", lambda m: _num(m.latency.p99_ms), True),
    SortKey("failures", lambda m: _num(m.failure_total), True),
    SortKey("state", lambda m: (m.state != "READY", m.name), False),
)


def threshold_style(value: float | int | None, limit: float | None) -> str:
    """Red at or over the limit, yellow from 75% of it, plain otherwise."""
    if value is None or limit is None:
        return ""
    if value >= limit:
        return "bold red"
    return "yellow" if value >= 0.75 * limit else ""


def model_cells(model: ModelSnapshot, limits: Mapping[str, float]) -> tuple[Text, ...]:
    """The row for one model version."""
    latency = model.latency
    failures = model.failure_total
    return (
        Text(model.name, style="bold"),
        Text(model.version),
        Text(model.state, style=STATE_STYLES.get(model.state, "dim")),
        Text(model.backend or fmt.MISSING),
        Text(fmt.number(model.queue_depth), justify="right",
             style=threshold_style(model.queue_depth, limits.get("queue_depth"))),
        Text(fmt.number(model.request_rate), justify="right"),
        Text(fmt.number(model.inference_rate), justify="right"),
        Text(fmt.number(model.avg_batch), justify="right"),
        Text(fmt.number(latency.p50_ms, 2), justify="right",
             style=threshold_style(latency.p50_ms, limits.get("p50_ms"))),
        Text(fmt.number(latency.p99_ms, 2), justify="right",
             style=threshold_style(latency.p99_ms, limits.get("p99_ms"))),
        Text(fmt.number(failures), justify="right", style="bold red" if failures else ""),
        Text(model.execution_mode or fmt.MISSING),
        Text(",".join(f"NPU{d}" for d in model.devices) or fmt.MISSING),
    )


def fit(text: str, width: int, right: bool) -> str:
    """A cell's text cut (with an ellipsis) or padded to its column."""
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text.rjust(width) if right else text.ljust(width)


def row_line(cells: tuple[Text, ...]) -> Text:
    """A whole row as one line of fixed-width columns (one table cell renders far faster than thirteen)."""
    parts: list[str] = []
    spans: list[Span] = []
    offset = 0
    for cell, width in zip(cells, WIDTHS, strict=True):
        parts.append(fit(cell.plain, width, cell.justify == "right"))
        if cell.style:
            spans.append(Span(offset, offset + width, cell.style))
        offset += width + 1
    return Text(" ".join(parts), spans=spans)


HEADER = row_line(tuple(Text(label, justify="right" if 4 <= index <= 10 else "left")
                        for index, label in enumerate(COLUMNS)))
ROW_COLUMN = "row"


def visible_models(models: Sequence[ModelSnapshot], needle: str, sort: SortKey) -> list[ModelSnapshot]:
    """Models whose name contains the filter text, in sort order."""
    chosen = [m for m in models if needle.lower() in m.name.lower()]
    return sorted(chosen, key=sort.key, reverse=sort.descending)  # type: ignore[arg-type]


def row_key(model: ModelSnapshot) -> str:
    """A row's identity: name and version."""
    return f"{model.name}/{model.version}"


class ModelsTable(DataTable[Text]):
    """One DataTable cell per model row; only rows whose text changed are updated."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self.needle = ""
        self.sort_index = 0
        self.thresholds: Thresholds = {}
        self._models: tuple[ModelSnapshot, ...] = ()
        self._rows: dict[str, Text] = {}

    def on_mount(self) -> None:
        """Add the fixed columns."""
        self.add_column(HEADER, key=ROW_COLUMN, width=len(HEADER.plain))

    @property
    def sort_key(self) -> SortKey:
        """The current sort column."""
        return SORT_KEYS[self.sort_index]

    @property
    def selected_key(self) -> str | None:
        """The row key under the cursor."""
        if not self.row_count:
            return None
        return str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)

    def show_models(self, models: Sequence[ModelSnapshot]) -> None:
        """Show these models under the current filter and sort."""
        self._models = tuple(models)
        shown = visible_models(self._models, self.needle, self.sort_key)
        rows = {row_key(m): row_line(model_cells(m, self.thresholds.get(m.name, {}))) for m in shown}
        if list(rows) == list(self._rows):
            self._update_changed(rows)
        else:
            self._rebuild(rows)
        self._rows = rows

    def _update_changed(self, rows: dict[str, Text]) -> None:
        """Update only the rows whose text or colours changed."""
        for key, line in rows.items():
            old = self._rows[key]
            if line.plain != old.plain or line.spans != old.spans:
                self.update_cell(key, ROW_COLUMN, line)

    def _rebuild(self, rows: dict[str, Text]) -> None:
        """Replace all rows, keeping the cursor on the same model where it is still shown."""
        selected = self.selected_key
        self.clear()
        for key, line in rows.items():
            self.add_row(line, key=key)
        keys = list(rows)
        if selected in keys:
            self.move_cursor(row=keys.index(selected), animate=False)

    def set_filter(self, needle: str) -> None:
        """Filter by name (case-insensitive substring)."""
        self.needle = needle
        self.show_models(self._models)

    def next_sort(self) -> SortKey:
        """Cycle to the next sort column."""
        self.sort_index = (self.sort_index + 1) % len(SORT_KEYS)
        self.show_models(self._models)
        return self.sort_key
