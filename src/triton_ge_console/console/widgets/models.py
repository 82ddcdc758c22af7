"""The models table: one row per model version, filterable, sortable, thresholds coloured."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.events import Click
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from triton_ge_console.display import MISSING, number, printable, threshold_level, token_latency_cells
from triton_ge_console.sessions.observe.snapshot import ModelSnapshot
from triton_ge_console.triton_terms import (
    FAILING,
    MODEL_LOADING,
    MODEL_READY,
    MODEL_UNAVAILABLE,
    MODEL_UNLOADING,
)

DRAWN_ROWS = 1024  # rows whose lines are kept: the rows in view and many more, not every model for ever
Thresholds = Mapping[str, Mapping[str, float]]  # model -> {"queue_depth": 8, "p99_ms": 50, "timed_out": 1}

COLUMNS = ("MODEL", "VER", "STATE", "BACKEND", "QUEUE", "REQ/S", "INF/S", "BATCH", "P50 ms", "P99 ms",
           "FAIL", "T/O", "MODE", "DEVICE")  # T/O: requests rejected when their queue timeout expired
WIDTHS = (20, 3, 11, 8, 6, 7, 7, 6, 8, 8, 5, 4, 12, 10)
# FAILING: READY in Triton's index, yet not serving
STATE_STYLES = {MODEL_READY: "green", MODEL_UNAVAILABLE: "bold red", MODEL_LOADING: "yellow",
                MODEL_UNLOADING: "yellow", FAILING: "bold white on red"}


@dataclass(frozen=True)
class SortKey:
    """A column the table can sort by; numbers sort largest first."""

    label: str
    key: Callable[[ModelSnapshot], object]
    descending: bool
    column: int  # its index in COLUMNS, marked in the header


def _num(value: float | int | None) -> float:
    """Missing numbers sort last."""
    return float("-inf") if value is None else float(value)


def shown_latency(model: ModelSnapshot) -> tuple[float | None, float | None]:
    """The figures the P50 and P99 cells show: Triton's request duration, or a generate model's TTFT and ITL
    p50 (its request duration ends before the first token), so a sort orders what the cells read."""
    if model.generation is not None:
        return model.generation.ttft_p50_ms, model.generation.itl_p50_ms
    return model.latency.p50_ms, model.latency.p99_ms


SORT_KEYS = (
    SortKey("name", lambda m: (m.name, m.version), False, COLUMNS.index("MODEL")),
    SortKey("queue", lambda m: _num(m.queue_depth), True, COLUMNS.index("QUEUE")),
    SortKey("req/s", lambda m: _num(m.request_rate), True, COLUMNS.index("REQ/S")),
    SortKey("inf/s", lambda m: _num(m.inference_rate), True, COLUMNS.index("INF/S")),
    SortKey("p99", lambda m: _num(shown_latency(m)[1]), True, COLUMNS.index("P99 ms")),
    SortKey("failures", lambda m: _num(m.failure_total), True, COLUMNS.index("FAIL")),
    SortKey("timed out", lambda m: _num(m.timed_out_total), True, COLUMNS.index("T/O")),
    SortKey("state", lambda m: (m.serving_state != MODEL_READY, m.name), False, COLUMNS.index("STATE")),
)


THRESHOLD_STYLES = {"over": "bold red", "near": "yellow", "": ""}


def threshold_style(value: float | int | None, limit: float | None) -> str:
    """Red at or over the limit, yellow from 75% of it, plain otherwise."""
    return THRESHOLD_STYLES[threshold_level(value, limit)]


Cell = tuple[str, str, bool]  # text, style, right-aligned
RIGHT_ALIGNED = frozenset(range(4, 12))  # QUEUE .. T/O


def timed_out_style(count: int | None, limits: Mapping[str, float]) -> str:
    """The spec's `timed_out` threshold where it has one; else any timed-out request shows in yellow."""
    if "timed_out" in limits:
        return threshold_style(count, limits["timed_out"])
    return "yellow" if count else ""


def model_fields(model: ModelSnapshot, limits: Mapping[str, float]) -> tuple[Cell, ...]:
    """The row for one model version as plain cells (cheap: a refresh builds one per model)."""
    failures = model.failure_total
    return (
        (printable(model.name), "bold", False),
        (model.version, "", False),
        (model.serving_state, STATE_STYLES.get(model.serving_state, "dim"), False),
        (model.backend or MISSING, "", False),
        (number(model.queue_depth), threshold_style(model.queue_depth, limits.get("queue_depth")), True),
        (number(model.request_rate), "", True),
        (number(model.inference_rate), "", True),
        (number(model.avg_batch), "", True),
        *latency_fields(model, limits),
        (number(failures), "bold red" if failures else "", True),
        (number(model.timed_out_total), timed_out_style(model.timed_out_total, limits), True),
        (model.execution_mode or MISSING, "", False),
        (",".join(f"NPU{d}" for d in model.devices) or MISSING, "", False),
    )


def latency_fields(model: ModelSnapshot, limits: Mapping[str, float]) -> tuple[Cell, Cell]:
    """The P50 and P99 cells: Triton's request duration, or a generate model's TTFT and ITL p50 (tagged)."""
    p50, p99 = shown_latency(model)
    if model.generation is not None:
        ttft, itl = token_latency_cells(p50, p99)
        return (ttft, "", True), (itl, "", True)
    return ((number(p50, 2), threshold_style(p50, limits.get("p50_ms")), True),
            (number(p99, 2), threshold_style(p99, limits.get("p99_ms")), True))


def model_cells(model: ModelSnapshot, limits: Mapping[str, float]) -> tuple[Text, ...]:
    """The row for one model version as Rich cells (for tables outside the console, e.g. the text summary)."""
    return tuple(Text(text, style=style, justify="right" if right else "left")
                 for text, style, right in model_fields(model, limits))


def fit(text: str, width: int, right: bool) -> str:
    """A cell's text cut (with an ellipsis) or padded to its column."""
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text.rjust(width) if right else text.ljust(width)


class Columns(NamedTuple):
    """Which of a row's cells a table shows (indices into COLUMNS) and each one's width."""

    shown: tuple[int, ...]
    widths: tuple[int, ...]

    @property
    def width(self) -> int:
        """A row's width: the cells and one space between each two."""
        return sum(self.widths) + len(self.widths) - 1

    def pick(self, cells: tuple[Cell, ...]) -> tuple[Cell, ...]:
        """The shown cells of a full row."""
        return tuple(cells[index] for index in self.shown)


FULL = Columns(tuple(range(len(COLUMNS))), WIDTHS)
# narrower tables drop mode and devices, then backend and batch, each column as narrow as it reads: what an
# operator watches (version, state, queue, rates, latency, failures) stays in view without scrolling sideways
MEDIUM = Columns(tuple(range(12)), (17, 3, 11, 7, 5, 6, 6, 5, 7, 7, 4, 3))
COMPACT = Columns((0, 1, 2, 4, 5, 6, 8, 9, 10), (17, 3, 11, 5, 7, 7, 7, 7, 4))  # 76: 80 columns, boxed


def columns_for(width: int) -> Columns:
    """The widest set of columns that fits (the compact one when none does)."""
    return next((columns for columns in (FULL, MEDIUM) if columns.width <= width), COMPACT)


def row_segments(cells: tuple[Cell, ...], base: Style, parse: Callable[[str], Style],
                 widths: tuple[int, ...] = WIDTHS) -> list[Segment]:
    """A row as fixed-width columns over a base style, built directly (Text.render costs far more per row)."""
    segments: list[Segment] = []
    plain: list[str] = []  # unstyled text up to the next styled cell
    last = len(cells) - 1
    for index, ((text, style, right), width) in enumerate(zip(cells, widths, strict=True)):
        if style:
            if plain:
                segments.append(Segment("".join(plain), base))
                plain = []
            segments.append(Segment(fit(text, width, right), base + parse(style)))
        else:
            plain.append(fit(text, width, right))
        if index < last:
            plain.append(" ")
    if plain:
        segments.append(Segment("".join(plain), base))
    return segments


SORTED_STYLE = "underline"


def header_cells(sort: SortKey, columns: Columns) -> tuple[Cell, ...]:
    """The shown columns' labels; the sort column's underlined, with ▼ (largest first) or ▲ where it fits."""
    cells: list[Cell] = []
    for index, width in zip(columns.shown, columns.widths, strict=True):
        label, right = COLUMNS[index], index in RIGHT_ALIGNED
        if index != sort.column:
            cells.append((label, "", right))
            continue
        arrow = "▼" if sort.descending else "▲"
        marked = f"{arrow}{label}" if right else f"{label} {arrow}"
        cells.append((marked if len(marked) <= width else label, SORTED_STYLE, right))
    return tuple(cells)


def visible_models(models: Sequence[ModelSnapshot], needle: str, sort: SortKey) -> list[ModelSnapshot]:
    """Models whose name contains the filter text, in sort order."""
    wanted = needle.lower()
    chosen = [m for m in models if wanted in m.name.lower()] if wanted else list(models)
    return sorted(chosen, key=sort.key, reverse=sort.descending)  # type: ignore[arg-type]


def line_runs(lines: Iterable[int]) -> list[tuple[int, int]]:
    """(first line, count) for each run of consecutive line numbers, in order: one repaint per run."""
    runs: list[tuple[int, int]] = []
    for line in sorted(set(lines)):
        if runs and runs[-1][0] + runs[-1][1] == line:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((line, 1))
    return runs


def row_key(model: ModelSnapshot) -> str:
    """A row's identity: name and version."""
    return f"{model.name}/{model.version}"


class TableRenderPass(NamedTuple):
    """What every line of one render pass shares."""

    width: int
    scroll_x: int
    scroll_y: int
    base: Style
    header: Style
    cursor: Style


class ModelsTable(ScrollView, can_focus=True):
    """The models as fixed-width lines under a fixed header; a row re-renders only when its text changes
    (kept, unlike a DataTable, which renders every cell in view again when any cell changes: at 100 models
    that cost several times a refresh, benchmarks/dashboard_ab.py)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", show=False),
        Binding("down", "cursor(1)", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("home", "cursor(-1000000)", show=False),
        Binding("end", "cursor(1000000)", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {"models-table--header", "models-table--cursor"}
    DEFAULT_CSS = """
    ModelsTable { background: $surface; }
    ModelsTable > .models-table--header { background: $panel; text-style: bold; }
    ModelsTable > .models-table--cursor { background: $primary; color: $text; text-style: bold; }
    """

    class RowHighlighted(Message):
        """The cursor moved onto a row (its key: "model/version")."""

        def __init__(self, key: str | None) -> None:
            super().__init__()
            self.key = key

    cursor_row: reactive[int] = reactive(0, repaint=False)
    # what the screen feeds it; always_update: comparing 100 snapshots would cost what a repaint saves
    models: reactive[tuple[ModelSnapshot, ...]] = reactive((), repaint=False, always_update=True, init=False)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.needle = ""
        self.sort_index = 0
        self.thresholds: Thresholds = {}
        self._shown: dict[str, ModelSnapshot] = {}  # row key -> the snapshot shown, in display order
        self._keys: list[str] = []
        # row key -> the snapshot and the base style its line was drawn from, and that line
        self._drawn: LRUCache[str, tuple[ModelSnapshot, Style, Strip]] = LRUCache(DRAWN_ROWS)
        self._columns = FULL  # all of them, or a smaller set (MEDIUM, COMPACT) when the table is narrower
        self._pass: TableRenderPass | None = None  # the render pass under way's lookups

    @property
    def sort_key(self) -> SortKey:
        """The current sort column."""
        return SORT_KEYS[self.sort_index]

    @property
    def row_keys(self) -> list[str]:
        """Row keys in display order."""
        return list(self._keys)

    @property
    def selected_key(self) -> str | None:
        """The row key under the cursor."""
        return self._keys[self.cursor_row] if self._keys else None

    def watch_models(self) -> None:
        """New figures: show them under the current filter and sort."""
        self._show_rows()

    def _show_rows(self) -> None:
        """The models under the current filter and sort, keeping the cursor on the same model."""
        shown = {row_key(m): m for m in visible_models(self.models, self.needle, self.sort_key)}
        selected = self.selected_key
        order_changed = list(shown) != self._keys
        self._shown, self._keys = shown, list(shown)
        self._fit_virtual_size()
        if order_changed:
            self.move_cursor(self._keys.index(selected) if selected in self._keys else self.cursor_row)
            self.refresh()
        else:
            self._refresh_changed_rows()

    def on_resize(self) -> None:
        """Too narrow for every column: a smaller set (the scrollbar's width kept free, shown or not)."""
        columns = columns_for(self.size.width - self.styles.scrollbar_size_vertical)
        if columns != self._columns:
            self._columns = columns
            self._drawn.clear()
            self._fit_virtual_size()
            self.refresh()

    def _fit_virtual_size(self) -> None:
        """What there is to scroll over: the shown columns' width, the header and one line per row."""
        self.virtual_size = Size(self._columns.width, len(self._keys) + 1)

    def _refresh_changed_rows(self) -> None:
        """Repaint the rows in view whose snapshot changed (rows out of view redraw when scrolled to)."""
        top = int(self.scroll_y)
        in_view = range(top, min(len(self._keys), top + self.size.height))
        changed = [index + 1 for index in in_view if not self._is_drawn(self._keys[index])]  # line 0: header
        for first, count in line_runs(changed):
            self.refresh_lines(first, count)

    def _is_drawn(self, key: str) -> bool:
        """Whether the row's lines were drawn from the snapshot it shows now."""
        drawn = self._drawn.get(key)
        return drawn is not None and _same_model(drawn[0], self._shown[key])

    def _row_strip(self, key: str, style: Style) -> Strip:
        """A row's line in a style, rebuilt only when its snapshot or its base style (cursor, theme, dimmed
        while stale) differs from the one it was drawn from."""
        model = self._shown[key]
        drawn = self._drawn.get(key)
        if drawn is None or drawn[1] != style or not _same_model(drawn[0], model):
            cells = self._columns.pick(model_fields(model, self.thresholds.get(model.name, {})))
            drawn = (model, style, self._strip(cells, style))
            self._drawn.set(key, drawn)
        return drawn[2]

    def move_cursor(self, row: int) -> None:
        """Put the cursor on a row (clamped), scrolled into view."""
        self.cursor_row = max(0, min(row, len(self._keys) - 1))

    def watch_cursor_row(self, old: int, new: int) -> None:
        """Redraw both rows, keep the cursor visible, announce the row."""
        for row in (old, new):
            self.refresh_line(row + 1)
        body = max(1, self.size.height - 1)
        if new < self.scroll_y:
            self.scroll_to(y=new, animate=False)
        elif new >= self.scroll_y + body:
            self.scroll_to(y=new - body + 1, animate=False)
        self.post_message(self.RowHighlighted(self.selected_key))

    def action_cursor(self, delta: int) -> None:
        """Move the cursor by delta rows."""
        self.move_cursor(self.cursor_row + delta)

    def action_page(self, direction: int) -> None:
        """Move the cursor by a screenful."""
        self.move_cursor(self.cursor_row + direction * max(1, self.size.height - 2))

    def on_click(self, event: Click) -> None:
        """Clicking a row selects it."""
        if event.y >= 1:
            self.move_cursor(int(self.scroll_y) + event.y - 1)

    def render_lines(self, crop: Region) -> list[Strip]:
        """Look up what the lines of this pass share once (each lookup walks the DOM), not once per line."""
        self._pass = self.look_up_pass()
        try:
            return super().render_lines(crop)
        finally:
            self._pass = None

    def look_up_pass(self) -> TableRenderPass:
        """What every line of a render pass shares."""
        base = self.rich_style
        return TableRenderPass(self.size.width, int(self.scroll_x), int(self.scroll_y), base,
                          self.get_component_rich_style("models-table--header"),
                          base + self.get_component_rich_style("models-table--cursor"))

    def render_line(self, y: int) -> Strip:
        """Line 0 is the header; the rest are rows from the scroll position."""
        now = self._pass or self.look_up_pass()
        left, right = now.scroll_x, now.scroll_x + now.width
        if y == 0:
            header = header_cells(self.sort_key, self._columns)
            return self._strip(header, now.header).crop_extend(left, right, now.header)
        index = now.scroll_y + y - 1
        if index >= len(self._keys):
            return Strip.blank(now.width, now.base)
        style = now.cursor if index == self.cursor_row else now.base
        return self._row_strip(self._keys[index], style).crop_extend(left, right, style)

    def _strip(self, cells: tuple[Cell, ...], base: Style) -> Strip:
        """One row of cells as a strip over a base style."""
        return Strip(row_segments(cells, base, self.app.console.get_style, self._columns.widths))

    def set_filter(self, needle: str) -> None:
        """Filter by name (case-insensitive substring)."""
        self.needle = needle
        self._show_rows()

    def next_sort(self) -> SortKey:
        """Cycle to the next sort column."""
        self.sort_index = (self.sort_index + 1) % len(SORT_KEYS)
        self._show_rows()
        self.refresh_line(0)  # the header marks the new sort column, even when the order stayed
        return self.sort_key


def _same_model(a: ModelSnapshot | None, b: ModelSnapshot) -> bool:
    """Same snapshot (identity first: an idle model's snapshot is often the very same object)."""
    return a is b or a == b
