"""`up` reports how long Triton has been loading the models (Triton itself says nothing meanwhile)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.models import write_echo_model
from triton_ge_console.repository.progress import Feed
from triton_ge_console.sessions.launcher import LaunchOptions, launch
from triton_ge_console.sessions.lifecycle import down
from triton_ge_console.sessions.server.registry import Registry


@pytest.mark.server  # launches a real tritonserver
def test_the_wait_for_ready_models_reports_its_elapsed_time(tmp_path: Path) -> None:
    """A model whose initialize takes 1.5 s: the elapsed hook hears "loading echo" past a second, and
    the step lines still come through the same feed."""
    repo = tmp_path / "repo"
    model_py = write_echo_model(repo) / "1" / "model.py"
    slow = "    def initialize(self, args):\n        __import__('time').sleep(1.5)\n"
    model_py.write_text(model_py.read_text().replace("    def initialize(self, args):\n", slow))
    lines: list[str] = []
    waits: list[tuple[str, float]] = []
    registry = Registry()
    record = launch(LaunchOptions(source=repo, name="slowish", timeout=120), registry,
                    Feed(lines.append, elapsed=lambda what, seconds: waits.append((what, seconds))))
    try:
        assert {what for what, _ in waits} == {"loading echo"}
        assert max(seconds for _, seconds in waits) >= 1.0
        assert any(line.startswith("repository: ") for line in lines)
    finally:
        down(record, registry)
