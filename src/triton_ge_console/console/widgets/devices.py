"""Per-NPU rows: utilization sparkline, memory bar, kind, temperature, power and health."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from triton_ge_console.console import format as fmt
from triton_ge_console.console.widgets.titles import retitle
from triton_ge_console.sessions.snapshot import DeviceSnapshot, ServerSnapshot

SPARK_WIDTH = 30
BAR_WIDTH = 16
DevicesFrame = tuple[ServerSnapshot, dict[str, list[float | None]]]  # a snapshot and recent utilization
NARROW_BELOW = 130  # terminal columns under which rows use a short sparkline and bar


def device_line(device: DeviceSnapshot, utilization_series: Sequence[float | None],
                narrow: bool = False) -> Text:
    """One device as a single line (shorter sparkline and bar on narrow terminals)."""
    spark_width, bar_width = (10, 8) if narrow else (SPARK_WIDTH, BAR_WIDTH)
    name = device.name or ""
    line = Text()
    line.append(f"NPU{device.id:<3}", style="bold")
    line.append(f" {name:<6} ")
    line.append(f"{device.kind:<13}", style="cyan" if device.kind == "npu" else "magenta")
    line.append(" " if narrow else " util ")
    line.append(fmt.sparkline(utilization_series, spark_width, top=1.0), style="green")
    line.append(f" {fmt.percent(device.utilization):>4}  ")
    line.append("" if narrow else "HBM ")
    line.append(fmt.bar(device.memory_used_bytes, device.memory_total_bytes, bar_width), style="blue")
    line.append(f" {fmt.gib(device.memory_used_bytes):>5}/{fmt.gib(device.memory_total_bytes):<5} GiB  ")
    temp = fmt.MISSING if device.temperature_c is None else f"{device.temperature_c:.0f}°C"
    power = fmt.MISSING if device.power_w is None else f"{device.power_w:.0f} W"
    line.append(f"{temp:>5} {power:>5}  " if narrow else f"{temp:>5}  {power:>6}  ")
    health = device.health or fmt.MISSING
    line.append(health, style="green" if health == "OK" else ("yellow" if health != fmt.MISSING else "dim"))
    return line


def devices_text(snapshot: ServerSnapshot, series: dict[str, list[float | None]], width: int = 160) -> Text:
    """All devices, one per line; a note when the server reports none."""
    if not snapshot.devices:
        return Text(" no device figures yet (the GE glue reports them once a model is loaded)", style="dim")
    narrow = width < NARROW_BELOW
    lines = [device_line(d, series.get(d.id, []), narrow) for d in snapshot.devices]
    return Text("\n").join(lines)


class DevicesPanel(Static):
    """The devices box; fed a snapshot plus each device's recent utilization."""

    frame: reactive[DevicesFrame | None] = reactive(None, repaint=False)
    _shown_count = -1

    def watch_frame(self, frame: DevicesFrame | None) -> None:
        """Redraw all rows; re-layout only when the number of rows changes."""
        if frame is None:
            return
        snapshot, series = frame
        count = len(snapshot.devices)
        retitle(self, f"Devices ({count})")
        self.update(devices_text(snapshot, series, self.app.size.width), layout=count != self._shown_count)
        self._shown_count = count
