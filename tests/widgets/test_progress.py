"""The notebooks' progress: a bar and a line while a build copies, the elapsed time while Triton loads."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pytest

from tests.models import age, save_external
from triton_ge_console.repository.build import build_repository
from triton_ge_console.repository.progress import ticking
from triton_ge_console.repository.spec.load import load_spec
from triton_ge_console.sessions.observe.source import CommandResult
from triton_ge_console.widgets import CommandRunner, ProgressWidget


def test_a_copied_build_fills_the_bar_and_a_wait_shows_its_elapsed_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GE_CONSOLE_CACHE_DIR", str(tmp_path / "cache"))
    save_external(tmp_path / "m.onnx", location="m.data")
    os.truncate(tmp_path / "m.data", 8 << 20)
    age(tmp_path / "m.onnx", tmp_path / "m.data")
    (tmp_path / "deploy.yaml").write_text("models:\n  - {name: m, backend: ge, source: m.onnx}\n")
    widget = ProgressWidget(show_after_s=0.0)
    assert widget.box.layout.display == "none"
    build_repository(load_spec(tmp_path / "deploy.yaml"), tmp_path / "repo", link=False, progress=widget)
    assert widget.label.value == "copying m/1/m.data  8.0 MiB / 8.0 MiB (100%)"
    assert widget.bar.value == 1.0 and widget.box.layout.display == "flex"
    shown = threading.Event()
    with ticking("loading m", widget.elapsed, every_s=0.02):
        deadline = time.monotonic() + 10
        while not widget.label.value.startswith("loading m … ") and time.monotonic() < deadline:
            shown.wait(0.02)
    assert widget.label.value.startswith("loading m … ") and widget.bar.layout.visibility == "hidden"
    widget.clear()
    assert widget.box.layout.display == "none"


def test_a_command_s_status_says_how_long_triton_has_taken_so_far() -> None:
    """Past a second, the status reads "… reloading m … 1 s" while the command still runs."""
    runner = CommandRunner(background=False)
    seen: list[str] = []

    def slow_reload() -> CommandResult:
        deadline = time.monotonic() + 10
        while "reloading m …" not in runner.status.value and time.monotonic() < deadline:
            time.sleep(0.05)  # the command itself waits for what the ticking thread writes
        seen.append(runner.status.value)
        return CommandResult("reload", "m", ok=True, message="reload m: version 1 READY", duration_s=1.2)

    runner.run("reload", "m", slow_reload)
    assert len(seen) == 1 and re.fullmatch(r"… reloading m … \d+ s", seen[0]), seen
    assert "✓ reload m: version 1 READY (1.2s)" in runner.status.value
