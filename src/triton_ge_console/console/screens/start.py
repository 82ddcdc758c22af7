"""What `ge-console` shows with nothing to open: running sessions, a new deployment from a spec, the demo."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Footer, Input, OptionList, Static
from textual.widgets.option_list import Option

from triton_ge_console.console.lifeline import Lifeline, hold_for
from triton_ge_console.console.toasts import PlainToasts


@dataclass(frozen=True)
class StartChoice:
    """What the operator picked: open a session, launch a spec/repository, or run the demo."""

    kind: str  # "session" | "launch" | "demo"
    value: str = ""


@dataclass(frozen=True)
class SessionEntry:
    """One registered session as the start screen lists it."""

    name: str
    state: str
    http_url: str


class StartApp(PlainToasts[StartChoice]):
    """A small chooser; the console proper opens on whatever it returns."""

    CSS_PATH = "../console.tcss"
    TITLE = "GE Console"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q,escape", "quit", "quit"),
        Binding("d", "demo", "demo"),
    ]

    def __init__(self, sessions: list[SessionEntry]) -> None:
        super().__init__()
        self.sessions = sessions
        self.lifeline: Lifeline | None = None

    def on_mount(self) -> None:
        """Stop on SIGTERM or SIGHUP even when busy, and never outlive `serve`."""
        self.lifeline = hold_for(self)

    def on_unmount(self) -> None:
        """Whatever was chosen opens undisturbed."""
        if self.lifeline is not None:
            self.lifeline.release()

    def compose(self) -> ComposeResult:
        """Sessions, then the spec box, then the demo hint."""
        with Vertical(id="start-box"):
            yield Static(Text("GE Console — Triton on Ascend through CANN GE", style="bold"))
            yield Static("Running sessions (enter opens one):")
            options = [Option(f"{s.name:<20} {s.state:<9} {s.http_url}", id=s.name) for s in self.sessions]
            if not options:
                options = [Option("no sessions: start one below, or press d for the demo", disabled=True)]
            yield OptionList(*options, id="start-sessions")
            yield Static("New deployment: a spec file (.yaml) or a model repository folder, then enter:")
            yield Input(placeholder="path/to/spec.yaml", id="start-spec")
            demo = "d: run the demo (llama_model + bert_model in CPU emulation)"
            yield Static(Text(demo, style="bold green"))
        yield Footer()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Open a session."""
        if event.option.id:
            self.exit(StartChoice("session", event.option.id))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Launch a spec or repository, if it exists."""
        path = Path(event.value).expanduser()
        if not event.value or not path.exists():
            self.notify(f"{event.value or '(empty)'}: no such file or folder", severity="error")
            return
        self.exit(StartChoice("launch", str(path)))

    def action_demo(self) -> None:
        """Run the demo."""
        if not isinstance(self.focused, Input):
            self.exit(StartChoice("demo"))
