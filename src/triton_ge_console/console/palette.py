"""The command palette's provider: every registered action, searchable by its description."""

from __future__ import annotations

from functools import partial
from typing import cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from triton_ge_console.console import actions
from triton_ge_console.console.host import ActionRunner


def _title(action: actions.ConsoleAction) -> str:
    """The palette line: description and key."""
    key = f"  (key {actions.key_label(action)})" if action.key else ""
    return f"{action.description}{key}"


def _registry(screen: object) -> tuple[actions.ConsoleAction, ...]:
    """The actions of the screen the palette opened on (the fleet screen has its own)."""
    registry: tuple[actions.ConsoleAction, ...] = getattr(screen, "REGISTRY", actions.ACTIONS)
    return registry


class ActionCommands(Provider):
    """Offers the action registry in the command palette."""

    async def discover(self) -> Hits:
        """All actions, before anything is typed."""
        for action in _registry(self.screen):
            yield DiscoveryHit(_title(action), partial(self._run, action.id), help=action.label)

    async def search(self, query: str) -> Hits:
        """Actions whose description or short label matches."""
        matcher = self.matcher(query)
        for action in _registry(self.screen):
            title = _title(action)
            score = max(matcher.match(title), matcher.match(action.label))
            if score > 0:
                yield Hit(score, matcher.highlight(title), partial(self._run, action.id), help=action.label)

    def _run(self, action_id: str) -> None:
        """Go through the app's dispatcher, so destructive actions still ask."""
        cast(ActionRunner, self.app).action_run(action_id)
