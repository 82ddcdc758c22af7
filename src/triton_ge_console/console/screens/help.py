"""Every action, its key and what it does: generated from the action registry."""

from __future__ import annotations

from typing import ClassVar

from rich import box
from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from triton_ge_console.console import actions


def help_table(registry: tuple[actions.ConsoleAction, ...] = actions.ACTIONS) -> Table:
    """Key, action, and whether it asks first."""
    table = Table(title="GE Console actions", expand=True, box=box.SIMPLE_HEAD)
    table.add_column("key", style="bold cyan", no_wrap=True)
    table.add_column("action")
    table.add_column("group", style="dim")
    table.add_column("asks first", justify="center")
    for action in registry:
        table.add_row(actions.key_label(action), action.description, action.group,
                      "yes" if action.destructive else "")
    table.add_row("ctrl+p", "Command palette: every action by name", "view", "")
    table.add_row("q", "Quit", "view", "")
    return table


class HelpScreen(ModalScreen[None]):
    """A modal listing the registry."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "close")]

    def __init__(self, registry: tuple[actions.ConsoleAction, ...] = actions.ACTIONS) -> None:
        super().__init__()
        self.registry = registry

    def compose(self) -> ComposeResult:
        """The table in a scrollable box."""
        with VerticalScroll(id="help-box"):
            yield Static(help_table(self.registry))

    async def action_dismiss(self, result: None = None) -> None:
        """Close."""
        self.dismiss(result)
