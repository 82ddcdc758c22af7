"""`serve` never strands a console: it survives a resize storm, stops on SIGTERM, dies with its `serve`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import psutil
import pytest

from tests.models import write_echo_model
from tests.sessions.test_default_session import hand_made
from tests.sessions.test_races import killing_strays, servers_under
from tests.waiting import wait_until
from triton_ge_console.console.lifeline import LAST_RESORT_S, STOP_GRACE_S
from triton_ge_console.session_states import READY
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry, effective_state

# A model whose unload outlasts the lifeline's grace and last resort: the console stops it all the same
# (CI saw the console die mid-stop, its server left to others, the session "dead").
SLOW_UNLOAD_S = STOP_GRACE_S + LAST_RESORT_S + 2
STORM = 3000  # resize messages, sent as fast as the websocket takes them


@dataclass
class Served:
    """A running `ge-console serve` and its keyed URL."""

    process: subprocess.Popen[str]
    base: str
    key: str


@contextlib.contextmanager
def serving(state_dir: Path, *args: str) -> Iterator[Served]:
    """`ge-console serve` in its own process group; it and anything it left are killed afterwards."""
    env = {**os.environ, STATE_DIR_ENV: str(state_dir)}
    command = [sys.executable, "-m", "triton_ge_console.cli", "serve", *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                               start_new_session=True, text=True)
    consoles: list[psutil.Process] = []
    try:
        assert process.stdout is not None
        found = re.search(r"(http://127\.0\.0\.1:\d+)/\?key=(\S+)", process.stdout.readline())
        assert found is not None
        yield Served(process, found.group(1), found.group(2))
    finally:
        with contextlib.suppress(psutil.Error):
            consoles = psutil.Process(process.pid).children(recursive=True)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)
        for console in consoles:
            with contextlib.suppress(psutil.Error):
                console.kill()


@contextlib.asynccontextmanager
async def browser(served: Served) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    """What a browser does: open the page with the key, then the app's websocket."""
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as client:
        for _ in range(300):  # until serve has bound its port (it prints the URL first)
            with contextlib.suppress(aiohttp.ClientConnectionError):
                async with client.get(f"{served.base}/?key={served.key}") as page:
                    assert page.status == 200
                    break
            await asyncio.sleep(0.1)
        ws_url = served.base.replace("http:", "ws:") + "/ws?width=120&height=40"
        async with client.ws_connect(ws_url, origin=served.base) as websocket:
            yield websocket


async def console_of(served: Served, timeout: float = 60.0) -> psutil.Process:
    """The console process serve started for the browser, once it draws."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in psutil.Process(served.process.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "console" in child.cmdline() and "triton_ge_console.cli" in child.cmdline():
                    return child
        await asyncio.sleep(0.05)
    raise AssertionError("serve started no console")


async def drawn(websocket: aiohttp.ClientWebSocketResponse, timeout: float = 60.0) -> None:
    """Wait until the console has sent the browser some screen output."""
    message = await asyncio.wait_for(websocket.receive(), timeout)
    assert message.type == aiohttp.WSMsgType.BINARY, message


def gone(process: psutil.Process, timeout: float) -> bool:
    """Whether the process ends (or is only a zombie) within timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def a_stopped_session(state_dir: Path) -> str:
    """A registered session whose server is stopped: the dashboard opens on it, with no server needed."""
    registry = Registry(state_dir / "sessions")
    registry.save(hand_made("quiet"))
    return "quiet"


async def test_a_served_console_dies_with_its_serve(tmp_path: Path) -> None:
    with serving(tmp_path, "--session", a_stopped_session(tmp_path)) as served:
        async with browser(served) as websocket:
            await drawn(websocket)
            console = await console_of(served)
            os.kill(served.process.pid, signal.SIGKILL)
            assert await asyncio.to_thread(gone, console, 10.0), "the console outlived its serve"


async def test_a_served_console_survives_a_resize_storm_and_stops_on_sigterm(tmp_path: Path) -> None:
    with serving(tmp_path, "--session", a_stopped_session(tmp_path)) as served:
        async with browser(served) as websocket:
            await drawn(websocket)
            console = await console_of(served)
            for number in range(STORM):
                width, height = 60 + number % 90, 15 + number % 40
                await websocket.send_json(["resize", {"width": width, "height": height}])
            await websocket.send_json(["resize", {"width": 120, "height": 40}])
            await asyncio.sleep(1.0)
            assert console.is_running()
            started = time.monotonic()
            console.terminate()
            assert await asyncio.to_thread(gone, console, 10.0), "the console ignored SIGTERM"
            assert time.monotonic() - started < 10.0
        assert served.process.poll() is None, "serve itself keeps serving"


async def test_stopping_serve_stops_its_consoles(tmp_path: Path) -> None:
    with serving(tmp_path, "--session", a_stopped_session(tmp_path)) as served:
        async with browser(served) as websocket:
            await drawn(websocket)
            console = await console_of(served)
            served.process.terminate()
            assert await asyncio.to_thread(gone, console, 15.0), "serve left its console running"
            assert await asyncio.to_thread(served.process.wait, 15.0) is not None


@pytest.mark.server
async def test_a_console_that_started_a_server_still_stops_it_when_serve_is_killed(tmp_path: Path) -> None:
    write_echo_model(tmp_path / "repo", "echo", unload_s=SLOW_UNLOAD_S)
    registry = Registry(tmp_path / "sessions")
    with killing_strays(tmp_path), serving(tmp_path, str(tmp_path / "repo"), "--name", "launched") as served:
        async with browser(served) as websocket:
            await drawn(websocket)
            console = await console_of(served)
            await asyncio.to_thread(
                wait_until, lambda: registry.exists("launched")
                and effective_state(registry.load("launched")) == READY, 120.0)
            assert servers_under(tmp_path)
            os.kill(served.process.pid, signal.SIGKILL)
            assert await asyncio.to_thread(gone, console, 40.0), "the console outlived its serve"
        assert not servers_under(tmp_path), "the server the console started was left running"
    assert effective_state(registry.load("launched")) == "stopped"
