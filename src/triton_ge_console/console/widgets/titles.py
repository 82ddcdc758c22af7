"""Border titles set only when they change."""

from __future__ import annotations

from textual.widget import Widget


def retitle(widget: Widget, title: str) -> None:
    """Set a border title if it differs: every set repaints the widget's whole area, its children's too
    (the detail pane's charts, the models box's table)."""
    if widget.border_title != title:
        widget.border_title = title
