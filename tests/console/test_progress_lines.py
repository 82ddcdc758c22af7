"""Long work shows a progress line: the launch screen while a build copies and Triton loads, the
repository screen while a reload runs (Triton gives no progress, so the line says how long so far)."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Log, Static

from tests.models import age, save_external
from tests.waiting import until
from triton_ge_console.console.screens.launching import LaunchingScreen
from triton_ge_console.console.screens.repository import RepositoryScreen
from triton_ge_console.repository import progress
from triton_ge_console.repository.build import build_repository
from triton_ge_console.repository.progress import hooks_of, ticking
from triton_ge_console.repository.spec.load import load_spec
from triton_ge_console.sessions.observe.recorded import RecordedController
from triton_ge_console.sessions.observe.source import CommandResult

from .conftest import REPO, SIZE, recorded_app, replayed


def _text(screen: Screen[object], selector: str) -> str:
    """What a Static shows ("" before the screen has it)."""
    try:
        return str(screen.query_one(selector, Static).render())
    except NoMatches:
        return ""


async def test_launch_screen_shows_the_copy_and_the_wait_for_triton(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real copied build reports its bytes through the screen's feed, then a wait its elapsed time; a
    step line clears the progress line."""
    monkeypatch.setattr(progress, "SHOW_AFTER_S", 0.0)
    monkeypatch.setenv("GE_CONSOLE_CACHE_DIR", str(tmp_path / "cache"))
    save_external(tmp_path / "m.onnx", location="m.data")
    os.truncate(tmp_path / "m.data", 8 << 20)
    age(tmp_path / "m.onnx", tmp_path / "m.data")
    (tmp_path / "deploy.yaml").write_text("models:\n  - {name: m, backend: ge, source: m.onnx}\n")
    copied, loaded, seen = threading.Event(), threading.Event(), threading.Event()

    def startup(say: object) -> None:
        build_repository(load_spec(tmp_path / "deploy.yaml"), tmp_path / "repo", link=False,
                         progress=hooks_of(say)[0])  # type: ignore[arg-type]
        copied.wait(20)
        with ticking("loading m", hooks_of(say)[1], every_s=0.05):  # type: ignore[arg-type]
            loaded.wait(20)
        say("session ready")  # type: ignore[operator]
        seen.wait(20)

    app = recorded_app("healthy", RecordedController())
    async with app.run_test(size=SIZE) as pilot:
        screen = LaunchingScreen(startup, "Starting …")
        app.push_screen(screen)
        last = "copying m/1/m.data  8.0 MiB / 8.0 MiB (100%)"
        await until(pilot, lambda: _text(screen, "#launch-progress") == last, what="the copy's last line")
        copied.set()
        await until(pilot, lambda: _text(screen, "#launch-progress").startswith("loading m … "),
                    what="the wait's elapsed time")
        loaded.set()
        await until(pilot, lambda: "• session ready" in screen.query_one(Log).lines, what="the step")
        assert _text(screen, "#launch-progress") == ""
        seen.set()
        await until(pilot, lambda: app.screen is not screen, what="dismissed")


class _SlowController(RecordedController):
    """Reloads that last until the test lets them end (a big model loading)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def reload(self, model: str, config: str | None = None) -> CommandResult:
        """Block, then answer as recorded."""
        self.release.wait(30)
        return super().reload(model, config)


async def test_repository_screen_shows_how_long_a_reload_has_taken(tmp_path: Path) -> None:
    """After a second the screen says "reloading llama_model … N s"; the line goes once Triton answered."""
    repository = tmp_path / "repo"
    shutil.copytree(REPO, repository)
    controller = _SlowController()
    app = recorded_app("healthy", controller, repository=repository)
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        await pilot.press("down", "g")
        await until(pilot, lambda: isinstance(app.screen, RepositoryScreen))
        screen = app.screen
        line = screen.query_one("#repo-progress", Static)
        try:
            app.run_command("reload", "llama_model")
            await until(pilot, lambda: line.display and _text(screen, "#repo-progress").startswith(
                "reloading llama_model … "), what="the elapsed line")
        finally:
            controller.release.set()
        await until(pilot, lambda: not line.display, what="the line gone")
        assert ("reload", "llama_model", None) in controller.calls
