"""Forgetting a mouse selection in a widget whose lines it no longer fits."""

from __future__ import annotations

from textual.widget import Widget


def forget_selection(widget: Widget) -> None:
    """Drop the screen's selection in this widget (its lines would point past text that has fewer)."""
    screen = widget.screen
    if widget in screen.selections:
        screen.selections = {owner: span for owner, span in screen.selections.items() if owner is not widget}
