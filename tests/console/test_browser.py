"""`ge-console serve` as a person sees it: Debian's Chromium, driven by Playwright, on a running session.

Needs Chromium (`apt-get install chromium`, as .ci/run does) and Playwright for Python (the `test` extra);
without them these tests are reported skipped, with the reason. Set GE_SCREENSHOTS_DIR to keep a
screenshot of the page (docs/img/ holds the docs').
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.waiting import wait_until
from triton_ge_console.repository.build import build_demo_repository
from triton_ge_console.sessions.launcher import LaunchOptions, launch
from triton_ge_console.sessions.lifecycle import down
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry, SessionRecord

pytestmark = pytest.mark.server  # every test here starts a tritonserver

CHROMIUM = os.environ.get("GE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
PAGE_LIMIT_S = 60.0  # the page shows both seed models within this (a loaded 2-core machine)
ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")

playwright_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
if not Path(CHROMIUM).is_file():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, as .ci/run does)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SessionRecord, dict[str, str]]]:
    """The demo repository (llama_model, bert_model) served by a session in a private state dir."""
    root = tmp_path_factory.mktemp("browser")
    env = {**os.environ, STATE_DIR_ENV: str(root / "state")}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_DIR_ENV, env[STATE_DIR_ENV])
        build_demo_repository(root / "repository")
        registry = Registry(root / "state" / "sessions")
        record = launch(LaunchOptions(source=root / "repository", name="browser"), registry)
        try:
            yield record, env
        finally:
            down(record, registry)


@pytest.fixture
def served(session: tuple[SessionRecord, dict[str, str]]) -> Iterator[tuple[str, psutil.Process]]:
    """`ge-console serve --session browser`: its keyed URL and its process; stopped afterwards."""
    record, env = session
    command = [sys.executable, "-m", "triton_ge_console.cli", "serve", "--session", record.name]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
                              start_new_session=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/\?key=\S+", line)
        assert found is not None, line
        yield found.group(0), psutil.Process(server.pid)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def _consoles(server: psutil.Process) -> list[psutil.Process]:
    """The console processes this serve started (one per open page)."""
    found = []
    for child in server.children(recursive=True):
        try:
            if "console" in child.cmdline() and child.is_running():
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def test_the_served_console_shows_both_models_needs_the_key_and_ends_with_the_page(
        served: tuple[str, psutil.Process]) -> None:
    url, server = served
    base = url.split("/?", 1)[0]
    screen: list[str] = []  # the terminal output the page received, escape sequences removed

    def received(payload: str | bytes) -> None:
        text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else payload
        screen.append(ANSI.sub("", text))

    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 900})
            refused = page.goto(base + "/")
            assert refused is not None and refused.status == 403  # no key, no console
            page.on("websocket", lambda ws: ws.on("framereceived", received))
            opened = page.goto(url)
            assert opened is not None and opened.status == 200
            tick = lambda: page.wait_for_timeout(100)  # noqa: E731 (the page's events arrive while it waits)
            wait_until(lambda: all(m in "".join(screen) for m in ("llama_model", "bert_model")), PAGE_LIMIT_S,
                       what="both seed models on the page", pause=tick)
            assert _consoles(server), "no console process behind the page"
            shots = os.environ.get("GE_SCREENSHOTS_DIR")
            if shots:
                wait_until(lambda: "READY" in "".join(screen), PAGE_LIMIT_S, what="the models READY",
                           pause=tick)
                page.wait_for_timeout(3000)  # a few polls: figures and charts filled in
                page.screenshot(path=str(Path(shots) / "console-in-browser.png"))
            page.close()  # closing the page ends the console it started
            wait_until(lambda: not _consoles(server), 30.0, interval=0.1,
                       what="the console to end with its page")
        finally:
            browser.close()
    assert not [p for p in psutil.Process().children(recursive=True) if "chrom" in p.name()], "browser left"
