"""Repository screen (edit → validate → save → reload), logs screen (filter, search), start screen, serve."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from textual.widgets import Input, RichLog, Static, TextArea

from tests.waiting import until
from triton_ge_console.console.screens.logs import LogsScreen
from triton_ge_console.console.screens.repository import RepositoryScreen
from triton_ge_console.console.screens.start import SessionEntry, StartApp, StartChoice
from triton_ge_console.sessions.observe.recorded import RecordedController

from .conftest import REPO, SIZE, recorded_app, replayed
from .notices import notified, toasts_shown


async def test_edit_validate_save_reload(tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    shutil.copytree(REPO, repository)
    config = repository / "llama_model" / "config.pbtxt"
    original = config.read_text(encoding="utf-8")
    controller = RecordedController()
    app = recorded_app("healthy", controller, repository=repository)
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        await pilot.press("down", "g")  # llama_model selected, then the repository screen
        await until(pilot, lambda: isinstance(app.screen, RepositoryScreen))
        screen = app.screen
        assert isinstance(screen, RepositoryScreen) and screen.current is not None
        assert screen.current.name == "llama_model"
        await pilot.press("e")
        editor = screen.query_one(TextArea)
        editor.text = original.replace("max_batch_size: 8", "max_batch_size: eight")
        await pilot.pause()
        await pilot.press("ctrl+s")
        await until(pilot, lambda: notified(app, text="not saved"))
        assert config.read_text(encoding="utf-8") == original and controller.calls == []
        assert "line 3" in str(screen.query_one("#validation", Static).render())
        editor.text = original.replace("max_batch_size: 8", "max_batch_size: 4")
        await pilot.pause()
        await pilot.press("ctrl+s")
        await until(pilot, lambda: ("reload", "llama_model", None) in controller.calls)
        assert "max_batch_size: 4" in config.read_text(encoding="utf-8")
        assert not [p for p in config.parent.iterdir() if p.name.startswith(".config.pbtxt.")]


async def test_watch_reloads_the_model_whose_files_change(tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    shutil.copytree(REPO, repository)
    controller = RecordedController()
    app = recorded_app("healthy", controller, repository=repository)
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        await pilot.press("w")
        await until(pilot, lambda: notified(app, "watch on"))
        config = repository / "bert_model" / "config.pbtxt"
        for _ in range(40):  # the watcher arms asynchronously: edit until it reports (no fixed sleep)
            config.write_text(config.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
            if controller.calls:
                break
            await pilot.pause(0.25)
        await until(pilot, lambda: ("reload", "bert_model", None) in controller.calls)
        assert all(call[1] == "bert_model" for call in controller.calls)
        await pilot.press("w")
        await until(pilot, lambda: notified(app, "watch off"))


async def test_quitting_while_watching_ends_the_watch_thread(tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    shutil.copytree(REPO, repository)
    app = recorded_app("healthy", RecordedController(), repository=repository)
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        await pilot.press("w")
        await until(pilot, lambda: notified(app, "watch on"))
        stop = app.watch_stop
        assert stop is not None and not stop.is_set()
    # watchfiles returns once this is set; otherwise its thread blocks the interpreter's exit
    assert stop.is_set()


async def test_logs_level_filter_and_search() -> None:
    app = recorded_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, LogsScreen))
        view = app.screen.query_one(RichLog)
        await until(pilot, lambda: len(view.lines) >= 14)
        everything = len(view.lines)
        await pilot.press("f", "f")  # errors and worse
        assert isinstance(app.screen, LogsScreen) and app.screen.level == "E"
        errors = [strip.text for strip in view.lines]
        assert 0 < len(errors) < everything and not any(line.startswith("I1130") for line in errors)
        assert any("↳" in line for line in errors)  # GE failures carry what to do next
        await pilot.press("slash", *"Einsum", "enter")
        shown = lambda: "".join(strip.text for strip in view.lines)  # noqa: E731 - wrapped lines, joined
        await until(pilot, lambda: "Einsum" in shown() and "CompileGraph" not in shown())
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, LogsScreen))


async def test_start_screen_choices() -> None:
    app = StartApp([SessionEntry("prod", "ready", "http://127.0.0.1:8000")])
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("enter")
    assert app.return_value == StartChoice("session", "prod")
    app = StartApp([])
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("d")
    assert app.return_value == StartChoice("demo")


async def test_start_screen_shows_a_bracketed_path_verbatim(tmp_path: Path) -> None:
    """A path typed in is text: its "[bold]" is shown, not taken for markup (nor "[/]" raised on)."""
    typed = str(tmp_path / "m[bold]" / "deploy [/].yaml")
    app = StartApp([])
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        app.query_one("#start-spec", Input).value = typed
        app.query_one("#start-spec", Input).focus()
        await pilot.press("enter")
        toast = f"{typed}: no such file or folder"
        await until(pilot, lambda: toast in toasts_shown(app), what=f"a toast: {toast}")


def test_console_runs_under_the_web_driver_textual_serve_uses(tmp_path: Path) -> None:
    env = {**os.environ, "GE_CONSOLE_STATE_DIR": str(tmp_path),
           "TEXTUAL_DRIVER": "textual.drivers.web_driver:WebDriver", "COLUMNS": "120", "LINES": "40"}
    app = subprocess.Popen([sys.executable, "-m", "triton_ge_console.cli", "console"], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        assert app.stdout is not None
        first = app.stdout.read(4096)  # blocks until the app draws its first frame (the start screen)
        assert len(first) == 4096 and app.poll() is None
    finally:
        app.kill()
        _, errors = app.communicate(timeout=20)
    assert b"needs a terminal" not in errors
