"""Per-NPU rows: utilization sparkline, memory bar, kind, temperature, power and health."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from rich.text import Text
from textual import events
from textual.reactive import reactive
from textual.widgets import Static

from triton_ge_console.backend_glue.ledger import human_bytes
from triton_ge_console.console import format as fmt
from triton_ge_console.console.widgets.titles import retitle
from triton_ge_console.display import MISSING, memory, printable
from triton_ge_console.sessions.observe.snapshot import DeviceSnapshot, ServerSnapshot

Piece = tuple[str, str]  # text and its style ("" for none)
SPARK_WIDTH, BAR_WIDTH = 30, 16
NARROW_SPARK_WIDTH, NARROW_BAR_WIDTH = 7, 7  # so health ("Warning" too) fits an 80-column terminal
MEMORY_WIDTH = 16  # "9.1 MiB/64.0 GiB", "21.4/64.0 GiB"
DevicesFrame = tuple[ServerSnapshot, dict[str, list[float | None]]]  # a snapshot and recent utilization
NARROW_BELOW = 130  # terminal columns under which rows use a short sparkline and bar
NO_DEVICES: tuple[Piece, ...] = (
    (" no device figures yet (the GE glue reports them once a model is loaded)", "dim"),)
GAP = "  "  # between two columns
HEADER_STYLE = "bold"


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
    """One device's line as styled pieces under the header's labels. The kind is coloured only for a real
    NPU: cpu-emulated is normal, not an alarm."""
    spark, bar = (NARROW_SPARK_WIDTH, NARROW_BAR_WIDTH) if narrow else (SPARK_WIDTH, BAR_WIDTH)
    used, total = device.memory_used_bytes, device.memory_total_bytes
    temp = MISSING if device.temperature_c is None else f"{device.temperature_c:.0f}°C"
    power = MISSING if device.power_w is None else f"{device.power_w:.0f} W"
    if device.power_note and device.power_w is not None:
        power += " (card)"  # the card's power, the same for each of its chips (a 310P's)
    place = device.place()
    cells: dict[str, tuple[Piece, ...]] = {  # UTIL and HBM are exactly their columns' width
        "NPU": ((f"NPU{device.id}", "bold"),),
        "NAME": ((device.name or "", ""),),
        "KIND": ((device.kind, "cyan" if device.kind == "npu" else ""),),
        "UTIL": ((fmt.sparkline(utilization_series, spark, top=1.0), "green"),
                 (f" {fmt.percent_cell(device.utilization):>4}", "")),
        "HBM": ((fmt.bar(used, total, bar), "blue"), (f" {memory(used, total):>{MEMORY_WIDTH}}", "")),
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
    extra = [part for part in (place, "" if narrow else printable(", ".join(models))) if part]
    return (*pieces, (GAP + "  ".join(extra), "dim")) if extra else tuple(pieces)


def _health(health: str | None) -> Piece:
    """Health in green when OK, yellow otherwise, dim when unknown."""
    if not health:
        return MISSING, "dim"
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


def devices_text(rows: Sequence[tuple[Piece, ...]]) -> Text:
    """The device lines as one text."""
    return Text("\n").join(Text.assemble(*line) for line in rows)


class DevicesPanel(Static):
    """The devices box; fed a snapshot and each device's recent utilization."""

    frame: reactive[DevicesFrame | None] = reactive(None, repaint=False)
    _lines = 0  # how many lines are shown

    def watch_frame(self, frame: DevicesFrame | None) -> None:
        """Show the devices' lines."""
        if frame is None:
            return
        snapshot, series = frame
        retitle(self, f"Devices ({len(snapshot.devices)})")
        rows = device_rows(snapshot, series, self.app.size.width)
        self.update(devices_text(rows), layout=len(rows) != self._lines)  # laid out when it grew or shrank
        self._lines = len(rows)

    def on_resize(self, event: events.Resize) -> None:
        """Short or full lines follow the terminal's width at once, not at the next poll."""
        self.watch_frame(self.frame)
