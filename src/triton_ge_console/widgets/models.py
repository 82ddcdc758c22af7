"""The models table: live per-model figures with reload / load / unload buttons per model."""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping

import ipywidgets as w

from triton_ge_console.display import MISSING, number, token_latency_cells, token_latency_legend
from triton_ge_console.sessions.observe.snapshot import ModelSnapshot, ServerSnapshot
from triton_ge_console.sessions.observe.source import CommandResult, Controller, commands_disabled
from triton_ge_console.triton_terms import (
    CHANGING_STATES,
    FAILING,
    HELD_STATES,
    MODEL_LOADING,
    MODEL_READY,
    MODEL_UNAVAILABLE,
    MODEL_UNLOADING,
)
from triton_ge_console.widgets.command_runner import CommandRunner

COLUMNS = ("MODEL", "VER", "STATE", "BACKEND", "QUEUE", "REQ/S", "INF/S", "BATCH", "AVG ms", "P50 ms",
           "P99 ms", "FAIL", "T/O", "MODE")  # T/O: requests rejected when their queue timeout expired
ACTIONS = ("reload", "load", "unload")
STATE_COLOURS = {MODEL_READY: "green", MODEL_UNAVAILABLE: "firebrick", MODEL_LOADING: "darkorange",
                 MODEL_UNLOADING: "darkorange", FAILING: "white; background-color:firebrick"}

ActionHandler = Callable[[str, str], object]
ACTION_ICONS = {"reload": "refresh", "load": "play", "unload": "eject"}  # named by their tooltips
# the table fits a notebook panel 672 px wide (JupyterLab with its file browser open, in a 1000 px window):
# each model takes two lines of ten equal columns, its names first, then its figures and its buttons
NAMES = ("MODEL", "VER", "STATE", "BACKEND", "MODE")
GRID_ORDER = (*NAMES, *(c for c in COLUMNS if c not in NAMES))  # the cells of a row, left to right
SPANS = {"MODEL": 3, "STATE": 2, "BACKEND": 2, "MODE": 2}  # columns a name takes (one each figure)
GRID_COLUMNS = "repeat(10, minmax(0, 1fr))"
MODELS_CLASS = "ge-console-models"
_GROUP = len(GRID_ORDER) + 1  # the buttons' cell ends a row
SPAN_STYLE = "".join(f".{MODELS_CLASS} > :nth-child({_GROUP}n+{GRID_ORDER.index(c) + 1}) "
                     f"{{ grid-column: span {n}; }} " for c, n in SPANS.items())
MODELS_STYLE = (f"<style>.{MODELS_CLASS} {{ --jp-widgets-font-size: 11px; }} {SPAN_STYLE}"
                f".{MODELS_CLASS} .widget-html-content {{ white-space: nowrap; overflow: hidden; "
                "text-overflow: ellipsis; } "
                f".{MODELS_CLASS} .jupyter-button {{ padding: 0 2px; }}</style>")


def table_lines(texts: Mapping[str, str], tag: str = "td") -> str:
    """One model's (or, with th, the header's) two lines of an HTML table, laid out as the live table:
    what a closed dashboard leaves behind, cut to its column with the whole text in a tooltip."""
    def cell(column: str) -> str:
        text = html.escape(texts[column])
        return (f"<{tag} colspan='{SPANS.get(column, 1)}' title='{text}' style='padding:0 4px; "
                "text-align:left; overflow:hidden; text-overflow:ellipsis; white-space:nowrap'>"
                f"{text}</{tag}>")
    names, figures = GRID_ORDER[:len(NAMES)], GRID_ORDER[len(NAMES):]
    return (f"<tr>{''.join(cell(c) for c in names)}</tr>"
            f"<tr>{''.join(cell(c) for c in figures)}<{tag}></{tag}></tr>")


def cells_for(model: ModelSnapshot) -> dict[str, str]:
    """The table's text for one model version."""
    failures = model.failure_total
    return {**{
        "MODEL": model.name, "VER": model.version, "STATE": model.serving_state,
        "BACKEND": model.backend or MISSING,
        "QUEUE": number(model.queue_depth), "REQ/S": number(model.request_rate),
        "INF/S": number(model.inference_rate), "BATCH": number(model.avg_batch),
        "AVG ms": number(model.latency.avg_ms, 2),
        "P50 ms": number(model.latency.p50_ms, 2), "P99 ms": number(model.latency.p99_ms, 2),
        "FAIL": number(failures), "T/O": number(model.timed_out_total),
        "MODE": model.execution_mode or MISSING,
    }, **latency_cells(model)}


def latency_cells(model: ModelSnapshot) -> dict[str, str]:
    """A generate model's latency cells: its TTFT and ITL p50 (tagged), no average (Triton's request duration
    of a decoupled model ends before its first token); none for other models."""
    if model.generation is None:
        return {}
    ttft, itl = token_latency_cells(model.generation.ttft_p50_ms, model.generation.itl_p50_ms)
    return {"AVG ms": MISSING, "P50 ms": ttft, "P99 ms": itl}


def legend_html(models: tuple[ModelSnapshot, ...]) -> str:
    """What a generate model's latency cells read, when the table shows one ("" otherwise)."""
    generating = next((m.generation for m in models if m.generation is not None), None)
    return "" if generating is None else (
        f" <span style='font-size:11px; color:gray'>{html.escape(token_latency_legend(generating.window_s))}"
        "</span>")


def title_html(models: tuple[ModelSnapshot, ...]) -> str:
    """The table's title, with what a generate model's latency cells read when it shows one."""
    return f"{MODELS_STYLE}<b>Models</b>{legend_html(models)}"


def offered_actions(model: ModelSnapshot) -> set[str]:
    """The buttons a row shows: reload and unload for a loaded (or loading) model, load for any other."""
    return {"reload", "unload"} if model.state in HELD_STATES else {"load"}


def enabled_actions(model: ModelSnapshot, server_up: bool, busy: bool) -> set[str]:
    """Which buttons make sense: reload/unload a ready model, load one that is not; none while busy."""
    if busy or not server_up or model.state in CHANGING_STATES:
        return set()
    return {"reload", "unload"} if model.state == MODEL_READY else {"load"}


class ModelRow:
    """One model version's cells and its three buttons."""

    def __init__(self, name: str, version: str, on_action: ActionHandler) -> None:
        self.name, self.version = name, version
        self.cells = {column: w.HTML(MISSING) for column in COLUMNS}
        self.buttons = {action: w.Button(icon=ACTION_ICONS[action], tooltip=action,
                                         layout=w.Layout(width="24px"),
                                         button_style="warning" if action == "unload" else "")
                        for action in ACTIONS}
        for action, button in self.buttons.items():
            button.on_click(lambda _button, act=action: on_action(act, self.name))
        self.actions = w.HBox(list(self.buttons.values()), layout=w.Layout(grid_gap="0 2px"))
        self.model: ModelSnapshot | None = None

    def widgets(self) -> list[w.Widget]:
        """Grid children in GRID_ORDER, then the buttons in one cell."""
        return [*(self.cells[column] for column in GRID_ORDER), self.actions]

    def update(self, model: ModelSnapshot) -> None:
        """Show the model's figures."""
        self.model = model
        for column, text in cells_for(model).items():
            self.cells[column].value = html.escape(text)
            self.cells[column].tooltip = text  # the whole text where a narrow column cuts it
        colour = STATE_COLOURS.get(model.serving_state, "gray")
        self.cells["STATE"].value = f'<span style="color:{colour}">{html.escape(model.serving_state)}</span>'
        self.cells["STATE"].tooltip = model.reason or model.serving_state
        if model.timed_out_total:  # rejected at their queue timeout: coloured, as the console does
            self.cells["T/O"].value = f'<span style="color:darkorange">{model.timed_out_total}</span>'
        offered = offered_actions(model)
        for action, button in self.buttons.items():
            button.layout.display = None if action in offered else "none"

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
        # a server whose engine takes no model commands (vLLM, MindIE): every button off, the reason shown
        self.disabled = commands_disabled(controller)
        self.runner = runner or CommandRunner()
        self.rows: dict[tuple[str, str], ModelRow] = {}
        self.snapshot: ServerSnapshot | None = None
        self.server_up: bool | None = None  # False while the last figures are shown for a silent server
        self.header = [w.HTML(f"<b style='font-size:11px'>{column}</b>") for column in (*GRID_ORDER, "")]
        self.grid = w.GridBox(self.header, layout=w.Layout(grid_template_columns=GRID_COLUMNS,
                                                           grid_gap="0 4px"))
        self.grid.add_class(MODELS_CLASS)
        self.reasons = w.HTML("")
        self.title = w.HTML(title_html(()))
        self.box = w.VBox([self.title, self.grid, self.reasons, self.runner.status])

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
        lines = [f"<span style='color:firebrick'>{html.escape(m.name)}: {html.escape(m.serving_state)}: "
                 f"{html.escape(m.reason)}</span>"
                 for m in snapshot.models if m.reason and (m.state != MODEL_READY or m.failing)]
        if self.disabled:
            lines.append(f"<span style='color:gray'>load, unload, reload: {html.escape(self.disabled)}"
                         "</span>")
        self.reasons.value = "<br>".join(lines)
        self.title.value = title_html(snapshot.models)
        self.refresh_buttons()

    def refresh_buttons(self) -> None:
        """Enable each row's buttons for its model's state and whether a command is running on it."""
        server_up = self.snapshot is not None and self.snapshot.live and self.snapshot.error is None
        server_up = server_up and self.server_up is not False
        for row in self.rows.values():
            if row.model is not None:
                row.set_enabled(set() if self.disabled else
                                enabled_actions(row.model, server_up, self.runner.busy(row.name)))

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
