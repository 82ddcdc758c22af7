"""The fleet as views see it: its members (a name, where it answers, a session source) and a rolling
reload over them; live from the registry's sessions, or recorded for tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from triton_ge_console.fleet.rolling import RollingResult, Say, ServerOutcome, rolling_reload
from triton_ge_console.fleet.status import where_of
from triton_ge_console.sessions.observe.recorded import RecordedSource
from triton_ge_console.sessions.observe.source import SessionSource
from triton_ge_console.sessions.server.registry import Registry, SessionRecord
from triton_ge_console.triton_terms import MODEL_READY


@dataclass(frozen=True)
class FleetMember:
    """One server of the fleet."""

    name: str
    where: str  # host:port (and the Kubernetes target it came from)
    source: SessionSource
    record: SessionRecord | None = None  # None for a recording


class FleetSource(Protocol):
    """What the fleet screen and the notebook widget are built from."""

    members: list[FleetMember]

    def roll(self, model: str, say: Say) -> RollingResult:
        """Reload `model` on one member at a time, stopping at the first failure."""
        ...

    def rescan(self) -> list[FleetMember] | None:
        """Look the members up again: those that left (None: no change)."""
        ...

    def close(self) -> None:
        """Release every member's connections (servers keep running)."""
        ...


def _live_member(record: SessionRecord) -> FleetMember:
    """A member polled through the session's live source."""
    from triton_ge_console.sessions.live import LiveSource

    return FleetMember(record.name, where_of(record), LiveSource.from_record(record), record)


def member_named(fleet: FleetSource, name: str) -> FleetMember:
    """The member called `name`."""
    return next(member for member in fleet.members if member.name == name)


class LiveFleet:
    """The running sessions of the registry, each through its own live source; with the registry given,
    `rescan` follows sessions (and Kubernetes pods `attach k8s:` adds) as they come and go."""

    def __init__(self, records: Sequence[SessionRecord], registry: Registry | None = None) -> None:
        self.registry = registry
        self.members = [_live_member(r) for r in sorted(records, key=lambda r: r.name)]

    def rescan(self) -> list[FleetMember] | None:
        """Take the registry's running sessions as the members now (a new list; kept members keep their
        source); the members that left, for the caller to close once nothing polls them; None: no change."""
        if self.registry is None:
            return None
        from triton_ge_console.fleet.status import running_records

        records = {r.name: r for r in running_records(self.registry)}
        known = {m.name: m for m in self.members}
        if records.keys() == known.keys() and all(known[n].record == r for n, r in records.items()):
            return None
        kept = {n: m for n, m in known.items() if n in records and m.record == records[n]}
        self.members = [kept.get(name) or _live_member(records[name]) for name in sorted(records)]
        return [m for n, m in known.items() if n not in kept]

    def roll(self, model: str, say: Say) -> RollingResult:
        """fleet.rolling over the members' records (each proven by a request before the next)."""
        return rolling_reload([m.record for m in self.members if m.record is not None], model, say)

    def close(self) -> None:
        """Close every source."""
        for member in self.members:
            member.source.close()


class RecordedFleet:
    """Recorded sessions as a fleet; the roll goes through each recording's controller, whose scripted
    failures stop it, the way fleet.rolling stops at the first failed server."""

    def __init__(self, sources: Sequence[RecordedSource], where: Sequence[str] | None = None) -> None:
        places = list(where) if where is not None else [f"recording {s.name}" for s in sources]
        self.members = [FleetMember(s.name, w, s) for s, w in zip(sources, places, strict=True)]

    def roll(self, model: str, say: Say) -> RollingResult:
        """Reload on each member that lists the model, in name order, until one fails."""
        result = RollingResult(model)
        stopped = False
        for member in sorted(self.members, key=lambda m: m.name):
            versions = _recorded_versions(member, model)
            if stopped or not versions:
                outcome = "untouched" if stopped else "without the model"
                result.servers.append(ServerOutcome(member.name, outcome, "", versions))
                continue
            answer = member.source.controller.reload(model)
            step = ServerOutcome(member.name, "reloaded" if answer.ok else "failed", answer.message, versions)
            result.servers.append(step)
            say(f"{member.name}: {answer.message}")
            stopped = not answer.ok
        return result

    def rescan(self) -> list[FleetMember] | None:
        """A recording's members never change."""
        return None

    def close(self) -> None:
        """Close every recording."""
        for member in self.members:
            member.source.close()


def _recorded_versions(member: FleetMember, model: str) -> tuple[str, ...]:
    """The versions READY in the member's latest recorded snapshot."""
    latest = member.source.history.latest
    if latest is None:
        return ()
    return tuple(m.version for m in latest.models if m.name == model and m.state == MODEL_READY)
