"""The dashboard as plain text: what `ge-console demo` prints when there is no terminal to draw on."""

from __future__ import annotations

import io
from collections.abc import Mapping

from rich.console import Console
from rich.table import Table
from rich.text import Text

from triton_ge_console.console.connection import Connection
from triton_ge_console.console.widgets.devices import device_header, device_line
from triton_ge_console.console.widgets.header import header_text
from triton_ge_console.console.widgets.models import COLUMNS, SORT_KEYS, model_cells, visible_models
from triton_ge_console.sessions.observe.history import SnapshotHistory
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot


def dashboard_text(snapshot: ServerSnapshot, history: SnapshotHistory | None = None,
                   thresholds: Mapping[str, Mapping[str, float]] | None = None, width: int = 160) -> str:
    """Header, device lines and the models table, without colour."""
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None, force_terminal=False, legacy_windows=False)
    console.print(header_text(Connection(snapshot.session, 1.0, last_good=snapshot)))
    if snapshot.devices:
        console.print(Text.assemble(*device_header()))
    for device in snapshot.devices:
        series = history.device_series(device.id) if history else []
        console.print(device_line(device, [v for _, v in series]))
    table = Table(*COLUMNS, box=None, pad_edge=False)
    limits = thresholds or {}
    for model in visible_models(snapshot.models, "", SORT_KEYS[0]):
        table.add_row(*model_cells(model, limits.get(model.name, {})))
    console.print(table)
    if snapshot.error:
        console.print(Text(f"server not answering: {snapshot.error}"))
    return out.getvalue()
