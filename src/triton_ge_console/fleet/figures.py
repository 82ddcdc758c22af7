"""What the fleet views show, kept up to date one snapshot at a time: each member's latest snapshot, a row
per server and a row per model across the servers."""

from __future__ import annotations

from collections.abc import Sequence

from triton_ge_console.fleet.members import FleetMember
from triton_ge_console.fleet.models import FleetModelRow, model_rows
from triton_ge_console.fleet.status import FleetRow, row_from
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot

WAITING = "…"  # a member's health before its first poll came back


class FleetFigures:
    """Rows in member order; a member not heard from yet keeps a waiting row with no figures."""

    def __init__(self, members: Sequence[FleetMember]) -> None:
        self.members = list(members)
        self.latest: dict[str, ServerSnapshot] = {}
        self.polls = {m.name: 0 for m in self.members}
        self.rows: tuple[FleetRow, ...] = tuple(FleetRow(m.name, m.where, WAITING) for m in self.members)
        self.models: tuple[FleetModelRow, ...] = ()

    def regrouped(self, members: Sequence[FleetMember]) -> FleetFigures:
        """The figures for a new set of members: those that stay keep their row and latest snapshot."""
        figures = FleetFigures(members)
        rows = {row.name: row for row in self.rows}
        figures.latest = {n: s for n, s in self.latest.items() if n in figures.polls}
        figures.polls.update({n: c for n, c in self.polls.items() if n in figures.polls})
        figures.rows = tuple(rows.get(row.name, row) for row in figures.rows)
        figures.models = tuple(model_rows(figures.latest))
        return figures

    def take(self, member: str, snapshot: ServerSnapshot) -> None:
        """One member's snapshot: its row and the models across servers are rebuilt (a member that left
        meanwhile is ignored)."""
        if member not in self.polls:
            return
        self.latest[member] = snapshot
        self.polls[member] += 1
        self.rows = tuple(row_from(m.name, m.where, [snapshot]) if m.name == member else row
                          for m, row in zip(self.members, self.rows, strict=True))
        self.models = tuple(model_rows(self.latest))
