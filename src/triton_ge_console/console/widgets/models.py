"""The models table: one row per model version, filterable, sortable, thresholds coloured."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rich.text import Text
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


def visible_models(models: Sequence[ModelSnapshot], needle: str, sort: SortKey) -> list[ModelSnapshot]:
    """Models whose name contains the filter text, in sort order."""
    chosen = [m for m in models if needle.lower() in m.name.lower()]
    return sorted(chosen, key=sort.key, reverse=sort.descending)  # type: ignore[arg-type]


def row_key(model: ModelSnapshot) -> str:
    """A row's identity: name and version."""
    return f"{model.name}/{model.version}"


class ModelsTable(DataTable[Text]):
    """Redraws only the cells that changed when the set of rows is unchanged."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self.needle = ""
        self.sort_index = 0
        self.thresholds: Thresholds = {}
        self._models: tuple[ModelSnapshot, ...] = ()
        self._rows: dict[str, tuple[Text, ...]] = {}

    def on_mount(self) -> None:
        """Add the fixed columns."""
        for label, width in zip(COLUMNS, WIDTHS, strict=True):
            self.add_column(label, key=label, width=width)

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
        rows = {row_key(m): model_cells(m, self.thresholds.get(m.name, {})) for m in shown}
        if list(rows) == list(self._rows):
            self._update_changed(rows)
        else:
            self._rebuild(rows)
        self._rows = rows

    def _update_changed(self, rows: dict[str, tuple[Text, ...]]) -> None:
        """Update only the cells whose text or style changed."""
        for key, cells in rows.items():
            old = self._rows[key]
            for column, (new_cell, old_cell) in enumerate(zip(cells, old, strict=True)):
                if new_cell.plain != old_cell.plain or new_cell.style != old_cell.style:
                    self.update_cell(key, COLUMNS[column], new_cell)

    def _rebuild(self, rows: dict[str, tuple[Text, ...]]) -> None:
        """Replace all rows, keeping the cursor on the same model where it is still shown."""
        selected = self.selected_key
        self.clear()
        for key, cells in rows.items():
            self.add_row(*cells, key=key)
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
