"""The fleet screen: one row per server, or one per model across the servers; Enter opens a server's
dashboard (MemberDashboard, where Esc comes back)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from triton_ge_console.console import actions
from triton_ge_console.console import format as fmt
from triton_ge_console.console.host import FleetHost
from triton_ge_console.console.screens.dashboard import DashboardScreen
from triton_ge_console.console.widgets.titles import retitle
from triton_ge_console.display import MISSING, gib, number
from triton_ge_console.fleet.models import FleetModelRow, token_texts, versions_text
from triton_ge_console.fleet.rolling import RollingResult
from triton_ge_console.fleet.status import NO_ANSWER, FleetRow
from triton_ge_console.session_states import NOT_ANSWERING
from triton_ge_console.triton_terms import SERVER_LIVE, SERVER_READY, SERVER_UNREACHABLE

SERVER_COLUMNS = ("NAME", "WHERE", "HEALTH", "SERVER", "MODELS r/f/t", "REQ/S", "P99 ms", "NPU mean",
                  "NPU max", "NPU MEM GiB")
MODEL_COLUMNS = ("MODEL", "REPLICAS", "REQ/S", "WORST P99 ms", "RUN/WAIT", "TTFT/ITL p99 ms", "TOK/S", "KV",
                 "VERSIONS")
HEALTH_STYLES = {SERVER_READY: "bold green", SERVER_LIVE: "bold yellow", SERVER_UNREACHABLE: "bold red",
                 NOT_ANSWERING: "bold red", NO_ANSWER: "bold red"}
Cells = tuple[Text, ...]


def server_cells(row: FleetRow) -> Cells:
    """A server's row as table cells; a figure it did not give reads as the missing mark."""
    models = "/".join(number(n) for n in (row.models_ready, row.models_failing, row.models_total))
    memory = f"{gib(row.npu_memory_used_bytes)}/{gib(row.npu_memory_total_bytes)}"
    failing = "bold red" if row.models_failing else ""
    return (
        Text(row.name, style="bold"), Text(row.where),
        Text(row.health, style=HEALTH_STYLES.get(row.health, "dim")),
        Text(row.server or MISSING), Text(models, style=failing, justify="right"),
        _right(number(row.requests_per_s)), _right(number(row.worst_p99_ms, 2)),
        _right(fmt.percent_cell(row.npu_util_mean)), _right(fmt.percent_cell(row.npu_util_max)),
        _right(memory),
    )


def model_cells(row: FleetModelRow) -> Cells:
    """A model's row across the fleet; differing versions in yellow."""
    replicas = f"{row.replicas}/{row.servers}"
    return (
        Text(row.name, style="bold"),
        Text(replicas, style="" if row.replicas == row.servers else "bold red", justify="right"),
        _right(number(row.requests_per_s)), _right(number(row.worst_p99_ms, 2)),
        *(_right(text) for text in token_texts(row)),
        Text(versions_text(row), style="bold yellow" if row.versions_differ else ""),
    )


def _right(text: str) -> Text:
    """A right-aligned number cell."""
    return Text(text, justify="right")


def fleet_line(rows: Sequence[FleetRow], interval_s: float) -> Text:
    """The header: how many servers, and how many answer."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.health] = counts.get(row.health, 0) + 1
    line = Text(" GE Console", style="bold")
    line.append(f" ─ fleet of {len(rows)} servers", style="")
    for health, count in sorted(counts.items()):
        line.append(" ─ ", style="dim")
        line.append(f"{count} {health}", style=HEALTH_STYLES.get(health, "dim"))
    line.append(f" ─ refresh {interval_s:g}s", style="dim")
    return line


def roll_summary(result: RollingResult) -> str:
    """How a rolling reload ended, server by server, with the versions READY there now."""
    verdict = "done" if result.ok else "stopped at the first failure"
    return f"{result.model} {verdict}\n" + "\n".join(result.server_lines())


def fill_table(table: DataTable[Text], rows: Sequence[tuple[str, Cells]], shown: dict[str, Cells]) -> None:
    """Update only the cells that changed; rebuild when the set of rows changed (keeping the cursor)."""
    keys = [key for key, _cells in rows]
    if keys != [key.value for key in table.rows]:
        cursor = table.cursor_row
        table.clear()
        shown.clear()
        for key, cells in rows:
            table.add_row(*cells, key=key)
            shown[key] = cells
        if rows:
            table.move_cursor(row=min(max(cursor, 0), len(rows) - 1))
        return
    for key, cells in rows:
        before = shown.get(key, ())
        for index, cell in enumerate(cells):
            if index >= len(before) or before[index] != cell:
                table.update_cell(key, str(index), cell, update_width=True)
        shown[key] = cells


class FleetScreen(Screen[None]):
    """Servers (or models across servers) from the app's fleet rows; the fleet actions' keys."""

    REGISTRY = actions.FLEET_ACTIONS
    BINDINGS: ClassVar[list[BindingType]] = [*actions.bindings(actions.FLEET_ACTIONS, "app.")]
    view: reactive[str] = reactive("servers", init=False)

    def __init__(self) -> None:
        super().__init__()
        self._shown: dict[str, dict[str, Cells]] = {"servers": {}, "models": {}}

    @property
    def console(self) -> FleetHost:
        """The app, as far as this screen needs it."""
        return cast(FleetHost, self.app)

    def compose(self) -> ComposeResult:
        """Header, the two tables (one shown), the last roll, footer."""
        yield Static(id="fleet-status")
        with Vertical(id="fleet-box"):
            yield DataTable(id="fleet-servers", cursor_type="row", zebra_stripes=True)
            yield DataTable(id="fleet-models", cursor_type="row", zebra_stripes=True)
        yield Static(id="fleet-roll")
        yield Footer()

    def on_mount(self) -> None:
        """Columns, then follow the app's rows."""
        for table_id, columns in (("#fleet-servers", SERVER_COLUMNS), ("#fleet-models", MODEL_COLUMNS)):
            table = self.query_one(table_id, DataTable)
            for index, label in enumerate(columns):
                table.add_column(label, key=str(index))
        self.query_one("#fleet-models").display = False
        self.query_one("#fleet-roll").display = False
        self._title()
        self.watch(self.app, "fleet_rows", self.show_servers)
        self.watch(self.app, "fleet_models", self.show_models)
        self.watch(self.app, "last_roll", self.show_roll, init=False)

    def show_servers(self, rows: tuple[FleetRow, ...]) -> None:
        """One row per server, and the header's counts."""
        table = self.query_one("#fleet-servers", DataTable)
        fill_table(table, [(row.name, server_cells(row)) for row in rows], self._shown["servers"])
        line = fleet_line(rows, self.console.fleet_options.interval_s)
        self.query_one("#fleet-status", Static).update(line)

    def show_models(self, rows: tuple[FleetModelRow, ...]) -> None:
        """One row per model across the servers."""
        table = self.query_one("#fleet-models", DataTable)
        fill_table(table, [(row.name, model_cells(row)) for row in rows], self._shown["models"])
        self._title()

    def show_roll(self, result: RollingResult | None) -> None:
        """The last rolling reload's outcome, under the table."""
        box = self.query_one("#fleet-roll", Static)
        box.display = result is not None
        if result is not None:
            box.update(Text(roll_summary(result), style="" if result.ok else "bold red"))

    def _title(self) -> None:
        """The box title names the view and the keys that matter in it."""
        if self.view == "servers":
            title = f"Servers ({len(self.console.fleet_rows)}) ─ enter opens one ─ m models"
        else:
            title = f"Models across servers ({len(self.console.fleet_models)}) ─ r rolling reload ─ m servers"
        retitle(self.query_one("#fleet-box"), title)

    def watch_view(self, view: str) -> None:
        """Show the chosen table and give it the keys."""
        servers = view == "servers"
        self.query_one("#fleet-servers").display = servers
        self.query_one("#fleet-models").display = not servers
        self.query_one("#fleet-servers" if servers else "#fleet-models").focus()
        self._title()

    def toggle_view(self) -> None:
        """Servers ⇄ models."""
        self.view = "models" if self.view == "servers" else "servers"

    def _cursor_key(self, table_id: str) -> str | None:
        """The key of the row under a table's cursor."""
        table = self.query_one(table_id, DataTable)
        if not table.row_count:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def selected_server(self) -> str | None:
        """The server under the cursor in the servers view."""
        return self._cursor_key("#fleet-servers") if self.view == "servers" else None

    def selected_model(self) -> str | None:
        """The model under the cursor in the models view."""
        return self._cursor_key("#fleet-models") if self.view == "models" else None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a server opens its dashboard."""
        if event.data_table.id == "fleet-servers":
            self.console.action_run("open_server")


class MemberDashboard(DashboardScreen):
    """A fleet member's dashboard: Esc closes the filter if open, else returns to the fleet."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close_filter", "fleet")]

    def action_close_filter(self) -> None:
        """Clear the filter, or go back to the fleet screen."""
        if self.query_one("#filter", Input).display:
            super().action_close_filter()
        else:
            cast(FleetHost, self.app).close_member()
