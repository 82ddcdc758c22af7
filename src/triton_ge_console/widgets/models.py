"""The models table: live per-model figures with reload / load / unload buttons per model."""

from __future__ import annotations

import html
from collections.abc import Callable

import ipywidgets as w

from triton_ge_console.sessions.snapshot import ModelSnapshot, ServerSnapshot
from triton_ge_console.sessions.source import CommandResult, Controller
from triton_ge_console.widgets.command_runner import CommandRunner
from triton_ge_console.widgets.format import MISSING, number

COLUMNS = ("MODEL", "VER", "STATE", "BACKEND", "QUEUE", "REQ/S", "INF/S", "BATCH", "AVG ms", "P50 ms",
           "P99 ms", "FAIL", "T/O", "MODE")  # T/O: requests rejected when their queue timeout expired
ACTIONS = ("reload", "load", "unload")
STATE_COLOURS = {"READY": "green", "UNAVAILABLE": "firebrick", "LOADING": "darkorange",
                 "UNLOADING": "darkorange", "FAILING": "white; background-color:firebrick"}

ActionHandler = Callable[[str, str], object]


def cells_for(model: ModelSnapshot) -> dict[str, str]:
    """The table's text for one model version."""
    failures = model.failure_total
    return {
        "MODEL": model.name, "VER": model.version, "STATE": model.serving_state,
        "BACKEND": model.backend or MISSING,
        "QUEUE": number(model.queue_depth), "REQ/S": number(model.request_rate),
        "INF/S": number(model.inference_rate), "BATCH": number(model.avg_batch),
        "AVG ms": number(model.latency.avg_ms, 2),
        "P50 ms": number(model.latency.p50_ms, 2), "P99 ms": number(model.latency.p99_ms, 2),
        "FAIL": number(failures), "T/O": number(model.timed_out_total),
        "MODE": model.execution_mode or MISSING,
    }


def enabled_actions(model: ModelSnapshot, server_up: bool, busy: bool) -> set[str]:
    """Which buttons make sense: reload/unload a ready model, load one that is not; none while busy."""
    if busy or not server_up or model.state in ("LOADING", "UNLOADING"):
        return set()
    return {"reload", "unload"} if model.state == "READY" else {"load"}


class ModelRow:
    """One model version's cells and its three buttons."""

    def __init__(self, name: str, version: str, on_action: ActionHandler) -> None:
        self.name, self.version = name, version
        self.cells = {column: w.HTML(MISSING) for column in COLUMNS}
        self.buttons = {action: w.Button(description=action, layout=w.Layout(width="70px"),
                                         button_style="warning" if action == "unload" else "")
                        for action in ACTIONS}
        for action, button in self.buttons.items():
            button.on_click(lambda _button, act=action: on_action(act, self.name))
        self.model: ModelSnapshot | None = None

    def widgets(self) -> list[w.Widget]:
        """Grid children, left to right."""
        return [*self.cells.values(), *self.buttons.values()]

    def update(self, model: ModelSnapshot) -> None:
        """Show the model's figures."""
        self.model = model
        for column, text in cells_for(model).items():
            self.cells[column].value = html.escape(text)
        colour = STATE_COLOURS.get(model.serving_state, "gray")
        self.cells["STATE"].value = f'<span style="color:{colour}">{html.escape(model.serving_state)}</span>'
        self.cells["STATE"].tooltip = model.reason or None
        if model.timed_out_total:  # rejected at their queue timeout: coloured, as the console does
            self.cells["T/O"].value = f'<span style="color:darkorange">{model.timed_out_total}</span>'

    def set_enabled(self, actions: set[str]) -> None:
        """Enable exactly the given buttons."""
        for action, button in self.buttons.items():
            button.disabled = action not in actions

    @property
    def enabled(self) -> list[str]:
        """The actions whose buttons are enabled, sorted."""
        return sorted(action for action, button in self.buttons.items() if not button.disabled)

    @property
    def values(self) -> dict[str, str]:
        """The cell texts as shown (markup stripped), for tests and notebooks."""
        return {column: html.unescape(_strip_tags(cell.value)) for column, cell in self.cells.items()}


def _strip_tags(markup: str) -> str:
    """Text of a cell without the colour span."""
    if markup.startswith("<span"):
        return markup[markup.index(">") + 1:markup.rindex("</span>")]
    return markup


class ModelsPanel:
    """Every model version of a session; buttons send commands through the session's controller."""

    def __init__(self, controller: Controller, runner: CommandRunner | None = None) -> None:
        self.controller = controller
        self.runner = runner or CommandRunner()
        self.rows: dict[tuple[str, str], ModelRow] = {}
        self.snapshot: ServerSnapshot | None = None
        self.server_up: bool | None = None  # False while the last figures are shown for a silent server
        self.header = [w.HTML(f"<b>{column}</b>") for column in (*COLUMNS, "", "", "")]
        self.grid = w.GridBox(self.header, layout=w.Layout(
            grid_template_columns="minmax(110px, 2fr) 40px 110px 70px repeat(10, minmax(55px, 1fr)) "
                                  "repeat(3, 75px)",
            grid_gap="2px 6px"))
        self.reasons = w.HTML("")
        self.box = w.VBox([w.HTML("<b>Models</b>"), self.grid, self.reasons, self.runner.status])

    def update(self, snapshot: ServerSnapshot, server_up: bool | None = None) -> None:
        """Show the snapshot's models, adding and dropping rows as the repository changes; `server_up`
        False (the server stopped answering, the last figures still shown) disables every command."""
        self.snapshot = snapshot
        self.server_up = server_up
        keys = [(m.name, m.version) for m in snapshot.models]
        if keys != list(self.rows):
            self.rows = {key: self.rows.get(key) or ModelRow(*key, on_action=self.act) for key in keys}
            self.grid.children = [*self.header, *(c for row in self.rows.values() for c in row.widgets())]
        for model in snapshot.models:
            self.rows[(model.name, model.version)].update(model)
        self.reasons.value = "<br>".join(
            f"<span style='color:firebrick'>{html.escape(m.name)}: {html.escape(m.serving_state)}: "
            f"{html.escape(m.reason)}</span>"
            for m in snapshot.models if m.reason and (m.state != "READY" or m.failing))
        self.refresh_buttons()

    def refresh_buttons(self) -> None:
        """Enable each row's buttons for its model's state and whether a command is running on it."""
        server_up = self.snapshot is not None and self.snapshot.live and self.snapshot.error is None
        server_up = server_up and self.server_up is not False
        for row in self.rows.values():
            if row.model is not None:
                row.set_enabled(enabled_actions(row.model, server_up, self.runner.busy(row.name)))

    def act(self, action: str, model: str) -> bool:
        """Send one command (what a button click does); the outcome shows in the status label."""
        commands = {"reload": lambda: self.controller.reload(model),
                    "load": lambda: self.controller.load(model),
                    "unload": lambda: self.controller.unload(model)}
        started = self.runner.run(action, model, commands[action], done=self._done)
        self.refresh_buttons()
        return started

    def _done(self, _result: CommandResult) -> None:
        """Re-enable buttons once a command finished."""
        self.refresh_buttons()

    def row(self, model: str, version: str | None = None) -> ModelRow:
        """The row of a model (its newest version unless one is given)."""
        matches = [r for (name, ver), r in self.rows.items() if name == model and (version in (None, ver))]
        if not matches:
            raise KeyError(f"no model {model!r} in the table")
        return max(matches, key=lambda r: (int(r.version) if r.version.isdigit() else -1, r.version))
