"""Device gauges: per NPU (or emulated NPU) utilization with its history, memory, and health figures."""

from __future__ import annotations

import html

import ipywidgets as w
import numpy as np

from triton_ge_console.backend_glue.ledger import human_bytes
from triton_ge_console.display import MISSING, memory, number, percent
from triton_ge_console.sessions.observe.history import SnapshotHistory
from triton_ge_console.sessions.observe.snapshot import DeviceSnapshot, ServerSnapshot
from triton_ge_console.widgets.charts import plot_line, relative_times, sparkline, values, window
from triton_ge_console.widgets.static_charts import image_html, sparkline_svg


def gauge(description: str) -> w.FloatProgress:
    """A 0..1 bar with its short label right beside it (no wide label column)."""
    return w.FloatProgress(value=0.0, min=0.0, max=1.0, description=description,
                           style={"description_width": "initial"}, layout=w.Layout(width="150px"))


class DeviceRow:
    """One device: name and kind, utilization bar and sparkline, memory bar, temperature/power/health."""

    def __init__(self, device_id: str) -> None:
        self.device_id = device_id
        # one line that wraps where the output is narrow; no item shrinks below its content (no text cut)
        self.title = w.HTML(layout=w.Layout(max_width="320px"))
        self.utilization = gauge("util")
        self.utilization_label = w.Label(MISSING, layout=w.Layout(min_width="36px"))
        self.figure, self.line = sparkline(width="160px")
        self.memory = gauge("mem")
        self.memory_label = w.Label(MISSING)
        self.extra = w.HTML(MISSING)
        self.models = w.HTML("")  # the models this NPU serves, with what each holds on it
        items = [self.title, self.utilization, self.utilization_label, self.figure, self.memory,
                 self.memory_label, self.extra, self.models]
        for item in items[1:]:
            item.layout.flex = "0 0 auto"
        self.box = w.HBox(items, layout=w.Layout(align_items="center", flex_flow="row wrap",
                                                 grid_gap="0 8px"))

    def update(self, device: DeviceSnapshot, history: SnapshotHistory, now: float, seconds: float,
               models: list[tuple[str, int | None]] | None = None) -> None:
        """Show one device's latest figures and its utilization history."""
        name = f" {html.escape(device.name)}" if device.name else ""
        place = device.place()
        where = f" <small>({html.escape(place)})</small>" if place else ""
        kind = html.escape(device.kind)
        self.title.value = f"<b>NPU{html.escape(device.id)}</b>{where}{name} <i>{kind}</i>"
        self.utilization.value = min(max(device.utilization or 0.0, 0.0), 1.0)
        self.utilization_label.value = percent(device.utilization)
        used, total = device.memory_used_bytes, device.memory_total_bytes
        self.memory.value = min(used / total, 1.0) if used is not None and total else 0.0
        self.memory_label.value = memory(used, total)
        self.extra.value = html.escape(device_extras(device))
        self.models.value = html.escape(", ".join(name if size is None else f"{name} {human_bytes(size)}"
                                                  for name, size in models or ()))
        series = window(history.device_series(device.id, "utilization"), now, seconds)
        plot_line(self.line, relative_times(series, now), values(series))

    def sparkline_html(self) -> str:
        """The utilization history as a static image."""
        x, y = (np.asarray(v, dtype=float).tolist() for v in (self.line.x, self.line.y))
        return image_html(sparkline_svg(x, y), f"NPU{self.device_id} utilization history")

    @property
    def history_values(self) -> list[float]:
        """The plotted utilization history (NaN where missing)."""
        return [float(v) for v in np.asarray(self.line.y)]


def device_extras(device: DeviceSnapshot) -> str:
    """Temperature, power, health and where the figures came from, as far as known."""
    parts = []
    if device.temperature_c is not None:
        parts.append(f"{number(device.temperature_c, 0)}°C")
    if device.power_w is not None:
        card = " (card)" if device.power_note else ""  # a 310P's power is the board's, per chip
        parts.append(f"{number(device.power_w, 0)} W{card}")
    if device.health:
        parts.append(device.health)
    if device.source:
        parts.append(f"({device.source})")
    return "  ".join(parts) or MISSING


class DeviceGauges:
    """All devices of a session, one row each, rebuilt when the set of devices changes."""

    def __init__(self, history_seconds: float = 300.0) -> None:
        self.history_seconds = history_seconds
        self.rows: dict[str, DeviceRow] = {}
        self.empty = w.HTML("<i>no device figures yet</i>")
        self.box = w.VBox([w.HTML("<b>Devices</b>"), self.empty])

    def update(self, snapshot: ServerSnapshot, history: SnapshotHistory) -> None:
        """Show the snapshot's devices."""
        ids = [d.id for d in snapshot.devices]
        if ids != list(self.rows):
            for row_id in set(self.rows) - set(ids):
                self.rows.pop(row_id).box.close()
            self.rows = {i: self.rows.get(i) or DeviceRow(i) for i in ids}
            header = self.box.children[0]
            shown = [r.box for r in self.rows.values()] or [self.empty]
            self.box.children = [header, *shown]
        held = snapshot.models_by_device()
        for device in snapshot.devices:
            self.rows[device.id].update(device, history, snapshot.taken_at, self.history_seconds,
                                        held.get(device.id))
