"""The controller of a vLLM or MindIE session: their APIs load, unload and reload nothing, so each
command is refused with the reason (the console and the CLI show it); liveness is their own health."""

from __future__ import annotations

from triton_ge_console.sessions.observe.source import CommandResult
from triton_ge_console.sessions.server.engines import control_refusal


class EngineControl:
    """Commands to a server whose engine takes none: every one answers not-ok with the reason."""

    def __init__(self, engine: str) -> None:
        self.engine = engine
        self.disabled_reason = control_refusal(engine) or f"{engine}: no model commands"

    def _refused(self, action: str, model: str) -> CommandResult:
        """The refusal of one command."""
        return CommandResult(action, model, ok=False, message=f"{action} {model}: {self.disabled_reason}")

    def load(self, model: str, config: str | None = None) -> CommandResult:
        """Refused: the engine cannot load a model at run time."""
        return self._refused("load", model)

    def unload(self, model: str) -> CommandResult:
        """Refused: the engine cannot unload a model at run time."""
        return self._refused("unload", model)

    def reload(self, model: str, config: str | None = None) -> CommandResult:
        """Refused: the engine cannot reload a model at run time."""
        return self._refused("reload", model)
