"""A recorded fleet for the fleet screen and widget tests: the console's recordings as four servers.

alpha replays healthy.jsonl; beta failing.jsonl (llama_model READY yet FAILING); gamma healthy.jsonl with
llama_model at version 2 (the versions differ); delta disconnected.jsonl (it stops answering).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from triton_ge_console.console.options import ConsoleOptions
from triton_ge_console.fleet.members import FleetMember, RecordedFleet
from triton_ge_console.sessions.observe.recorded import RecordedController, RecordedSource
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot

CONSOLE_DATA = Path(__file__).resolve().parents[1] / "console" / "data"
MEMBERS = (("alpha", "healthy"), ("beta", "failing"), ("gamma", "healthy"), ("delta", "disconnected"))
WHERE = ("10.0.1.11:8000", "10.0.1.12:8000", "10.0.2.7:8000 (k8s:serving/app=triton)", "10.0.1.13:8000")
# every recording replayed to its end (the shorter ones repeat their last snapshot)
POLLS = max(len((CONSOLE_DATA / f"{name}.jsonl").read_text(encoding="utf-8").splitlines())
            for _member, name in MEMBERS)


def _snapshots(recording: str, member: str) -> list[ServerSnapshot]:
    """A recording's snapshots, named after the member; gamma's llama_model is version 2."""
    lines = (CONSOLE_DATA / f"{recording}.jsonl").read_text(encoding="utf-8").splitlines()
    snapshots = [ServerSnapshot.from_dict(json.loads(line)) for line in lines if line.strip()]
    if member == "gamma":
        snapshots = [dataclasses.replace(s, models=tuple(
            dataclasses.replace(m, version="2") if m.name == "llama_model" else m for m in s.models))
            for s in snapshots]
    return [dataclasses.replace(s, session=member) for s in snapshots]


def recorded_fleet(failures: dict[str, dict[tuple[str, str], str]] | None = None) -> RecordedFleet:
    """The four members; `failures` scripts a member's controller (member -> {(action, model): message})."""
    scripted = failures or {}
    log = CONSOLE_DATA / "server.log"
    sources = [RecordedSource(_snapshots(recording, member), name=member, log_path=log,
                              controller=RecordedController(scripted.get(member)))
               for member, recording in MEMBERS]
    return RecordedFleet(sources, WHERE)


def recorded_options(member: FleetMember) -> ConsoleOptions:
    """What the console opens a member with: the test repository, no server control."""
    return ConsoleOptions(interval_s=0.01, repository=CONSOLE_DATA / "repo")
