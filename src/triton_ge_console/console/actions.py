"""The one table of console actions: it feeds key bindings, the command palette and the help screen."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class ConsoleAction:
    """One operator action: the app runs `action_<id>`, asking first when destructive."""

    id: str
    key: str | None
    label: str  # the footer's short word
    description: str
    destructive: bool = False
    footer: bool = True
    group: str = "model"


ACTIONS: tuple[ConsoleAction, ...] = (
    ConsoleAction("reload_model", "r", "reload", "Reload the selected model"),
    ConsoleAction("load_model", "l", "load", "Load the selected model"),
    ConsoleAction("unload_model", "u", "unload", "Unload the selected model", destructive=True),
    ConsoleAction("reload_changed", "R", "reload changed", "Reload every model whose files changed"),
    ConsoleAction("toggle_watch", "w", "watch", "Watch the repository, reload on change",
                  group="server"),
    ConsoleAction("test_request", "t", "test request", "Send a test request to the selected model"),
    ConsoleAction("load_test", "b", "load test", "Run a load test on the selected model"),
    ConsoleAction("vs_direct", "v", "vs direct",
                  "Compare the selected model's own executor with Triton",
                  footer=False),
    ConsoleAction("show_repository", "g", "repository", "Open the repository screen", group="view"),
    ConsoleAction("show_logs", "o", "logs", "Open the server log", group="view"),
    ConsoleAction("filter_models", "slash", "filter", "Filter models by name", footer=False, group="view"),
    ConsoleAction("sort_models", "s", "sort", "Sort models by the next column", footer=False, group="view"),
    ConsoleAction("toggle_openai", None, "openai", "Serve the generate models as an OpenAI API (again: stop)",
                  group="server"),
    ConsoleAction("start_server", None, "start", "Start the server", group="server"),
    ConsoleAction("stop_server", None, "stop", "Stop the server", destructive=True, group="server"),
    ConsoleAction("restart_server", None, "restart", "Restart the server", destructive=True, group="server"),
    ConsoleAction("toggle_plog", None, "plog", "Toggle npu_ge plog for the next restart", group="server"),
    ConsoleAction("toggle_dump_graph", None, "dump_graph", "Toggle GE dump_graph for the next restart",
                  group="server"),
    ConsoleAction("toggle_profiling", None, "profiling", "Toggle profiling for the next restart",
                  group="server"),
    ConsoleAction("show_help", "question_mark", "help", "Show every action and its key",
                  footer=False, group="view"),
)

# the fleet screen's own actions (it opens when several sessions run); the server actions above apply
# to the server whose dashboard is open
FLEET_ACTIONS: tuple[ConsoleAction, ...] = (
    ConsoleAction("open_server", "enter", "open", "Open the selected server's dashboard (esc returns)",
                  group="fleet"),
    ConsoleAction("toggle_fleet_view", "m", "servers/models", "Switch between servers and models across them",
                  group="fleet"),
    ConsoleAction("rolling_reload", "r", "rolling reload",
                  "Reload the selected model on one server at a time, stopping at the first failure",
                  destructive=True, group="fleet"),
    ConsoleAction("show_help", "question_mark", "help", "Show every action and its key",
                  footer=False, group="view"),
)

_BY_ID = {action.id: action for action in (*ACTIONS, *FLEET_ACTIONS)}


def find(action_id: str) -> ConsoleAction:
    """The registered action with this id."""
    return _BY_ID[action_id]


def key_label(action: ConsoleAction) -> str:
    """How a key reads on screen ("/" rather than "slash")."""
    labels = {"slash": "/", "question_mark": "?"}
    return labels.get(action.key or "", action.key or "palette")


def bindings(registry: tuple[ConsoleAction, ...] = ACTIONS, namespace: str = "") -> list[Binding]:
    """Key bindings for every action with a key; each goes through the app's guarded dispatcher
    (namespace "app." when a screen holds the bindings)."""
    return [
        Binding(action.key, f"{namespace}run('{action.id}')", action.label, show=action.footer,
                key_display=key_label(action), tooltip=action.description)
        for action in registry
        if action.key is not None
    ]
