"""Per-NPU rows: utilization sparkline, memory bar, kind, temperature, power and health."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.selection import Selection
from textual.strip import Strip
from textual.widget import Widget

from triton_ge_console.backend_glue.ledger import human_bytes
from triton_ge_console.console import format as fmt
from triton_ge_console.console.widgets.dirty import changed_lines, repaint_lines
from triton_ge_console.console.widgets.selection import forget_selection
from triton_ge_console.console.widgets.titles import retitle
from triton_ge_console.sessions.snapshot import DeviceSnapshot, ServerSnapshot

SPARK_WIDTH, BAR_WIDTH = 30, 16
NARROW_SPARK_WIDTH, NARROW_BAR_WIDTH = 7, 7  # so health ("Warning" too) fits an 80-column terminal
MEMORY_WIDTH = 16  # "9.1 MiB/64.0 GiB", "21.4/64.0 GiB"
DevicesFrame = tuple[ServerSnapshot, dict[str, list[float | None]]]  # a snapshot and recent utilization
NARROW_BELOW = 130  # terminal columns under which rows use a short sparkline and bar
Piece = tuple[str, str]  # text and its style ("" for none)
MAX_STYLES = 4096  # cached piece styles (a few hundred in use): past this, start again
Span = tuple[int, int]  # the selected characters of one line: start, end (-1: to the line's end)
Looks = tuple[Style, Style]  # the widget's style and the selection's
NO_DEVICES: tuple[Piece, ...] = (
    (" no device figures yet (the GE glue reports them once a model is loaded)", "dim"),)
GAP = "  "  # between two columns
HEADER_STYLE = "bold"


class DevicesRenderPass(NamedTuple):
    """What every line of one render pass shares."""

    base: Style  # the widget's style
    selection: Selection | None  # the mouse selection in the widget
    selected: Style  # how selected characters look


class DeviceColumn(NamedTuple):
    """One column of the device lines: its header label, width and alignment."""

    label: str
    width: int
    right: bool = False


def device_columns(narrow: bool) -> tuple[DeviceColumn, ...]:
    """The columns in order; narrow lines put health before temperature and power (an 80-column crop
    cuts the least telling), with a shorter sparkline and bar."""
    spark, bar = (NARROW_SPARK_WIDTH, NARROW_BAR_WIDTH) if narrow else (SPARK_WIDTH, BAR_WIDTH)
    head = (DeviceColumn("NPU", 5), DeviceColumn("NAME", 5), DeviceColumn("KIND", 12),
            DeviceColumn("UTIL", spark + 5), DeviceColumn("HBM", bar + 1 + MEMORY_WIDTH))
    temp, power = DeviceColumn("TEMP", 5, right=True), DeviceColumn("POWER", 6, right=True)
    health = DeviceColumn("HEALTH", 7)
    return (*head, health, temp, power) if narrow else (*head, temp, power, health)


def device_header(narrow: bool = False) -> tuple[Piece, ...]:
    """The labels over the device lines, in the columns' places."""
    columns = device_columns(narrow)
    return ((GAP.join(_fit(c.label, c.width, c.right) for c in columns), HEADER_STYLE),)


def device_pieces(device: DeviceSnapshot, utilization_series: Sequence[float | None],
                  narrow: bool = False, models: Sequence[str] = ()) -> tuple[Piece, ...]:
    """One device's line as styled pieces under the header's labels: cheap to compare, so an unchanged
    line is not redrawn. The kind is coloured only for a real NPU: cpu-emulated is normal, not an alarm."""
    spark, bar = (NARROW_SPARK_WIDTH, NARROW_BAR_WIDTH) if narrow else (SPARK_WIDTH, BAR_WIDTH)
    used, total = device.memory_used_bytes, device.memory_total_bytes
    temp = fmt.MISSING if device.temperature_c is None else f"{device.temperature_c:.0f}°C"
    power = fmt.MISSING if device.power_w is None else f"{device.power_w:.0f} W"
    if device.power_note and device.power_w is not None:
        power += " (card)"  # the card's power, the same for each of its chips (a 310P's)
    place = device.place()
    cells: dict[str, tuple[Piece, ...]] = {  # UTIL and HBM are exactly their columns' width
        "NPU": ((f"NPU{device.id}", "bold"),),
        "NAME": ((device.name or "", ""),),
        "KIND": ((device.kind, "cyan" if device.kind == "npu" else ""),),
        "UTIL": ((fmt.sparkline(utilization_series, spark, top=1.0), "green"),
                 (f" {fmt.percent_cell(device.utilization):>4}", "")),
        "HBM": ((fmt.bar(used, total, bar), "blue"), (f" {fmt.memory(used, total):>{MEMORY_WIDTH}}", "")),
        "TEMP": ((temp, ""),),
        "POWER": ((power, ""),),
        "HEALTH": (_health(device.health),),
    }
    columns = device_columns(narrow)
    pieces: list[Piece] = []
    for column in columns:
        cell = cells[column.label]
        if len(cell) == 1:
            cell = ((_fit(cell[0][0], column.width, column.right), cell[0][1]),)
        pieces += (*cell, (GAP, "")) if column is not columns[-1] else cell
    # after the columns: where npu-smi shows the chip, and the models this NPU serves
    extra = [part for part in (place, "" if narrow else ", ".join(models)) if part]
    return (*pieces, (GAP + "  ".join(extra), "dim")) if extra else tuple(pieces)


def _health(health: str | None) -> Piece:
    """Health in green when OK, yellow otherwise, dim when unknown."""
    if not health:
        return fmt.MISSING, "dim"
    return health, "green" if health == "OK" else "yellow"


def _fit(text: str, width: int, right: bool) -> str:
    """A cell padded to its column (never cut: a longer name pushes the line, as before)."""
    return text.rjust(width) if right else text.ljust(width)


def device_line(device: DeviceSnapshot, utilization_series: Sequence[float | None],
                narrow: bool = False) -> Text:
    """One device as a single line (shorter sparkline and bar on narrow terminals)."""
    return Text.assemble(*device_pieces(device, utilization_series, narrow))


def device_rows(snapshot: ServerSnapshot, series: dict[str, list[float | None]],
                width: int = 160) -> list[tuple[Piece, ...]]:
    """The header and one line per device; a note when the server reports none."""
    if not snapshot.devices:
        return [NO_DEVICES]
    narrow = width < NARROW_BELOW
    held = models_by_device(snapshot)
    lines = [device_pieces(d, series.get(d.id, []), narrow, held.get(d.id, ())) for d in snapshot.devices]
    return [device_header(narrow), *lines]


def models_by_device(snapshot: ServerSnapshot) -> dict[str, list[str]]:
    """Per NPU id, the models running on it, each with the memory it holds there where the glue says."""
    return {device: [name if size is None else f"{name} {human_bytes(size)}" for name, size in held]
            for device, held in snapshot.models_by_device().items()}


class DevicesPanel(Widget):
    """The devices box; fed a snapshot plus each device's recent utilization, drawn line by line."""

    DEFAULT_CSS = "DevicesPanel { height: auto; }"
    frame: reactive[DevicesFrame | None] = reactive(None, repaint=False)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._rows: list[tuple[Piece, ...]] = []
        self._styles: dict[tuple[Looks, str, bool, int, int], Style] = {}  # see _styled
        # line -> what its strip was built from (pieces, looks, selected span) and the strip
        self._strips: dict[int, tuple[tuple[Piece, ...], Looks, Span | None, Strip]] = {}
        self._render_pass: DevicesRenderPass | None = None  # what the render pass under way looked up once

    def watch_frame(self, frame: DevicesFrame | None) -> None:
        """Repaint only the lines whose text changed; re-layout only when the number of lines changes."""
        if frame is None:
            return
        snapshot, series = frame
        retitle(self, f"Devices ({len(snapshot.devices)})")
        rows = device_rows(snapshot, series, self.app.size.width)
        if rows == self._rows:
            return
        old, self._rows = self._rows, rows
        if len(rows) != len(old):
            if self.is_mounted:
                forget_selection(self)
            self.refresh(layout=True)
            return
        repaint_lines(self, changed_lines(old, rows))  # those lines only, not the box around them

    def on_resize(self, event: events.Resize) -> None:
        """Short or full lines follow the terminal's width at once, not at the next poll."""
        self.watch_frame(self.frame)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """One line per device (or the note)."""
        return max(1, len(self._rows))

    def render_lines(self, crop: Region) -> list[Strip]:
        """Look the styles and the selection up once per render pass (each walks the DOM), not per line."""
        self._render_pass = self._look_up_pass()
        try:
            return super().render_lines(crop)
        finally:
            self._render_pass = None

    def _look_up_pass(self) -> DevicesRenderPass:
        """The widget's style, the selection in it and the selection's style."""
        return DevicesRenderPass(self.rich_style, self.text_selection, self.selection_style)

    def render_line(self, y: int) -> Strip:
        """A device's line, rebuilt only when its pieces, the widget's style or the selection changed."""
        base, selection, selected_style = self._render_pass or self._look_up_pass()
        width = self.size.width
        if y >= len(self._rows):
            return Strip.blank(width, base)
        pieces = self._rows[y]
        span = selection.get_span(y) if selection is not None else None
        looks = (base, selected_style)
        cached = self._strips.get(y)
        if cached is None or cached[:3] != (pieces, looks, span):
            cached = self._strips[y] = (pieces, looks, span, self._line_strip(y, pieces, looks, span))
        strip = cached[3]
        return strip.crop(0, width) if strip.cell_length > width else strip  # the box pads it

    def _line_strip(self, y: int, pieces: tuple[Piece, ...], looks: Looks, span: Span | None) -> Strip:
        """One line's strip; each segment knows where its text is, so the mouse can select it."""
        segments, x = [], 0
        for text, style, selected in _split_at_selection(pieces, span):
            segments.append(Segment(text, self._styled(looks, style, selected, x, y)))
            x += len(text)
        return Strip(segments)

    def _styled(self, looks: Looks, style: str, selected: bool, x: int, y: int) -> Style:
        """A piece's style over the widget's (looks[0]), the selection's (looks[1]) over it when selected,
        and the piece's text offset. Cached: a device line's pieces keep their places from one refresh to
        the next."""
        key = (looks, style, selected, x, y)
        found = self._styles.get(key)
        if found is None:
            if len(self._styles) > MAX_STYLES:
                self._styles.clear()
            base, selected_style = looks
            own = base + self.app.console.get_style(style) if style else base
            found = (own + selected_style if selected else own) + Style.from_meta({"offset": (x, y)})
            self._styles[key] = found
        return found

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        """The selected part of the device lines (nothing when fewer devices left it past the end)."""
        if selection.start is not None and selection.start.y >= len(self._rows):
            return None
        text = "\n".join("".join(piece for piece, _ in pieces) for pieces in self._rows)
        return selection.extract(text), "\n"


def _split_at_selection(pieces: Sequence[Piece], span: Span | None) -> list[tuple[str, str, bool]]:
    """The pieces cut where the selected characters start and end, each marked selected or not."""
    if span is None:
        return [(text, style, False) for text, style in pieces]
    start, end = span
    cut: list[tuple[str, str, bool]] = []
    x = 0
    for text, style in pieces:
        first = max(start, x) - x
        last = len(text) if end == -1 else min(end - x, len(text))
        if first < last:
            parts = ((text[:first], False), (text[first:last], True), (text[last:], False))
            cut += [(part, style, selected) for part, selected in parts if part]
        else:
            cut.append((text, style, False))
        x += len(text)
    return cut
