"""A terminal closed at any moment (before, during and after quitting) ends `ge-console demo` and stops the
server it started, within seconds: no console is left behind, spinning on the dead terminal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.console.test_terminal_lifeline import PseudoTerminal, drain_until, ended, in_a_terminal
from tests.sessions.test_races import killing_strays, servers_under
from tests.waiting import wait_until
from triton_ge_console.session_states import READY
from triton_ge_console.sessions.server.registry import Registry, effective_state

LEFT_THE_SCREEN = b"\x1b[?1049l"  # the app leaves the terminal's alternate screen: it has ended
ENDS_WITHIN_S = 30.0


@pytest.fixture(scope="module")
def demo_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One state dir for the module: the demo repository is built once."""
    return tmp_path_factory.mktemp("closed-terminal")


def reloading(terminal: PseudoTerminal, registry: Registry, seen: bytearray) -> None:
    """Press `r` (reload the selected model) and wait until the server loads it anew, as the report did."""
    log = registry.load("demo").log_path
    assert log is not None
    loads = log.read_text(encoding="utf-8").count("loading:")
    assert terminal.fd is not None
    os.write(terminal.fd, b"r")

    def loaded() -> bool:
        return log.read_text(encoding="utf-8").count("loading:") > loads

    assert drain_until(terminal, loaded, 60.0, seen), "the reload never began"


@pytest.mark.server
@pytest.mark.parametrize("moment", ["before-quitting", "while-quitting", "after-quitting"])
def test_closing_the_terminal_ends_the_demo_and_stops_its_server(demo_state: Path, moment: str) -> None:
    registry = Registry(demo_state / "sessions")
    seen = bytearray()

    def dashboard() -> bool:
        up = registry.exists("demo") and effective_state(registry.load("demo")) == READY
        return up and b"llama_model" in seen and b"READY" in seen

    with killing_strays(demo_state), in_a_terminal(demo_state, "demo") as terminal:
        assert drain_until(terminal, dashboard, 240.0, seen), "the demo's dashboard never showed"
        if moment != "before-quitting":
            reloading(terminal, registry, seen)
            assert terminal.fd is not None
            os.write(terminal.fd, b"q")
            seen.clear()
        if moment == "after-quitting":  # the app has ended; the console stops the server
            assert drain_until(terminal, lambda: LEFT_THE_SCREEN in seen, 30.0, seen), "the app did not end"
        terminal.close()
        wait_until(lambda: ended(terminal.pid), timeout=ENDS_WITHIN_S, what="the console ending")
        wait_until(lambda: not servers_under(demo_state), timeout=ENDS_WITHIN_S, what="the server stopping")
    assert registry.load("demo").state == "stopped"
