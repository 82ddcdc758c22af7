"""Rolling reload: a model reloaded on one server of the fleet at a time, each proven to take requests
before the next, stopping at the first failure with the rest untouched."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from triton_ge_console.sessions.act.control import ControlError, TritonControl, controller_for
from triton_ge_console.sessions.server.access import token_headers
from triton_ge_console.sessions.server.engines import control_refusal
from triton_ge_console.sessions.server.registry import SessionRecord
from triton_ge_console.triton_terms import MODEL_READY, SERVER_UNREACHABLE

if TYPE_CHECKING:
    from triton_ge_console.sessions.act.probe import ProbeResult

Probe = Callable[[str, str, dict[str, str]], "ProbeResult"]
Say = Callable[[str], None]


@dataclass(frozen=True)
class ServerOutcome:
    """What happened on one server, and the model versions READY there afterwards."""

    session: str
    outcome: str  # reloaded | failed | untouched | without the model
    message: str = ""
    ready_versions: tuple[str, ...] | None = None  # None: the server could not be asked

    @property
    def serving(self) -> str:
        """The versions READY there now, as views print them ("v1, v2", "no version READY", "unreachable")."""
        if self.ready_versions is None:
            return SERVER_UNREACHABLE
        return ", ".join(f"v{v}" for v in self.ready_versions) or "no version READY"


@dataclass
class RollingResult:
    """The whole roll: one outcome per server, in the order they were taken."""

    model: str
    servers: list[ServerOutcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether no server failed."""
        return all(s.outcome != "failed" for s in self.servers)

    def server_lines(self) -> list[str]:
        """One line per server: what happened there and which versions it serves now."""
        return [f"{s.session}: {s.outcome}; serving {s.serving}" for s in self.servers]


def _probe(http_url: str, model: str, headers: dict[str, str]) -> ProbeResult:
    """One request built from the model's metadata."""
    from triton_ge_console.sessions.act.probe import send_test_request  # numpy: not at the fleet's start

    return send_test_request(http_url, model, headers=headers)


def rolling_reload(records: Sequence[SessionRecord], model: str, say: Say, config: str | None = None,
                   probe: Probe = _probe) -> RollingResult:
    """Reload `model` on each server that has it loaded, in name order, stopping at the first failure; a
    vLLM or MindIE server is left out, with the reason said (their APIs reload nothing)."""
    result = RollingResult(model)
    stopped = False
    for record in sorted(records, key=lambda r: r.name):
        refused = control_refusal(record.engine)
        if refused is not None:  # a vLLM or MindIE server: watched only, left out of the roll
            say(f"{record.name}: left out: {refused}")
            continue
        control = controller_for(record)
        if stopped:
            result.servers.append(_outcome(record, control, model, "untouched"))
        elif not _serves(control, model):
            result.servers.append(_outcome(record, control, model, "without the model"))
        else:
            step = _reload_one(record, control, model, config, probe)
            result.servers.append(step)
            say(f"{record.name}: {step.message}")
            stopped = step.outcome == "failed"
    return result


def _serves(control: TritonControl, model: str) -> bool:
    """Whether a version of model is READY there (an unreachable server counts: its reload will fail)."""
    try:
        return any(e.name == model and e.state == MODEL_READY for e in control.index())
    except ControlError:
        return True


def _reload_one(record: SessionRecord, control: TritonControl, model: str, config: str | None,
                probe: Probe) -> ServerOutcome:
    """Reload (Triton swaps once the new instance is ready), then one request must succeed."""
    reloaded = control.reload(model, config)
    if not reloaded.ok:
        return _outcome(record, control, model, "failed", reloaded.message)
    answered = probe(record.http_url, model, token_headers(record))
    if not answered.ok:
        why = f"reloaded, but a request failed: {answered.message}"
        return _outcome(record, control, model, "failed", why)
    return _outcome(record, control, model, "reloaded", f"{reloaded.message}; {answered.message}")


def _outcome(record: SessionRecord, control: TritonControl, model: str, outcome: str,
             message: str = "") -> ServerOutcome:
    """An outcome with the versions READY there now."""
    try:
        versions: tuple[str, ...] | None = tuple(
            e.version for e in control.index() if e.name == model and e.state == MODEL_READY
        )
    except ControlError:
        versions = None
    return ServerOutcome(record.name, outcome, message, versions)
