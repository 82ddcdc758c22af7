"""`ge-console demo` without a terminal (as CI runs it) and the console's usage errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sessions.test_races import servers_under
from tests.waiting import wait_until
from triton_ge_console.session_states import STARTING, STOPPED
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry, effective_state

from .leftovers import stop_leftover_sessions


def _ge_console(args: list[str], state: Path, timeout: float = 240.0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, STATE_DIR_ENV: str(state)}
    return subprocess.run([sys.executable, "-m", "triton_ge_console.cli", *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env=env, timeout=timeout)


@pytest.mark.server
def test_demo_without_a_tty_runs_headless_prints_the_dashboard_and_stops(tmp_path: Path) -> None:
    try:
        result = _ge_console(["demo"], tmp_path)
    finally:
        left_running = stop_leftover_sessions(tmp_path)  # a timeout or failure must not leave a server
    assert result.returncode == 0, result.stdout + result.stderr
    assert left_running == []
    out = result.stdout
    assert "running the demo headless" in out
    assert "llama_model" in out and "bert_model" in out and "READY" in out
    assert "models READY and serving requests" in out
    record = Registry(tmp_path / "sessions").load("demo")
    assert record.state == STOPPED


@pytest.mark.server
def test_a_terminated_headless_demo_stops_its_server(tmp_path: Path) -> None:
    """SIGTERM (CI's timeout, a `kill`) while the headless demo's server loads its models (a point the demo
    cannot have passed on its own): it stops the server on the way out and exits 128 + 15."""
    env = {**os.environ, STATE_DIR_ENV: str(tmp_path)}
    command = [sys.executable, "-m", "triton_ge_console.cli", "demo", "--headless", "600"]
    registry = Registry(tmp_path / "sessions")
    demo = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    try:
        wait_until(lambda: registry.exists("demo") and effective_state(registry.load("demo")) == STARTING
                   and bool(servers_under(tmp_path)), 240.0, what="the demo's server starting")
        demo.terminate()
        assert demo.wait(timeout=60) == 128 + signal.SIGTERM
        assert not servers_under(tmp_path), "the demo's server was left running"
    finally:
        demo.kill()
        demo.wait(timeout=30)
        left_running = stop_leftover_sessions(tmp_path)
    assert left_running == []
    assert not registry.exists("demo") or registry.load("demo").state == STOPPED


def test_usage_errors_are_one_line() -> None:
    result = _ge_console(["demo", "--headless", "0"], Path("/nonexistent-state"), timeout=60)
    assert result.returncode == 2 and result.stderr.strip().startswith("ge-console: error: --headless 0")
    result = _ge_console(["console"], Path("/nonexistent-state"), timeout=60)
    assert result.returncode == 1 and "needs a terminal" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_demo_that_cannot_launch_says_so_in_one_error_line(tmp_path: Path) -> None:
    """A launch the demo cannot make (no tritonserver where $TRITONSERVER says) is one `ge-console: error:`
    line, as every verb's error is, and no server is left."""
    env = {**os.environ, STATE_DIR_ENV: str(tmp_path), "TRITONSERVER": str(tmp_path / "nonexistent")}
    result = subprocess.run([sys.executable, "-m", "triton_ge_console.cli", "demo", "--headless", "5"],
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=240)
    assert result.returncode == 1, result.stdout + result.stderr
    missing = tmp_path / "nonexistent"
    assert result.stderr.splitlines() == [f"ge-console: error: $TRITONSERVER={missing}: no such file"]
    assert stop_leftover_sessions(tmp_path) == []
