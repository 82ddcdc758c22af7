"""`ge-console serve`: a free loopback port, and nothing answers without the run's key."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from triton_ge_console.console.console_cli import SERVE_COOKIE, keyed_server
from triton_ge_console.sessions.server.process import free_port

KEY = "test-key-0123456789"


@pytest.fixture
async def served() -> AsyncIterator[str]:
    """The keyed textual-serve application on a free loopback port, in-process; its base URL."""
    port = free_port()
    runner = web.AppRunner(await keyed_server("true", KEY, port)._make_app())
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", port).start()
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_the_page_needs_the_key_then_the_cookie(served: str) -> None:
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as client:
        async with client.get(f"{served}/") as response:
            assert response.status == 403
        async with client.get(f"{served}/?key=wrong") as response:
            assert response.status == 403
        async with client.get(f"{served}/?key={KEY}") as response:
            assert response.status == 200 and "GE Console" in await response.text()
            cookie = response.headers["Set-Cookie"]
            assert f"{SERVE_COOKIE}=" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        async with client.get(f"{served}/") as response:  # the cookie alone, from now on
            assert response.status == 200


async def test_websockets_need_the_cookie_and_the_same_origin(served: str) -> None:
    ws_url = served.replace("http:", "ws:") + "/ws"
    async with aiohttp.ClientSession() as client:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await client.ws_connect(ws_url, origin=served)
        assert refused.value.status == 403
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as client:
        async with client.get(f"{served}/?key={KEY}") as response:
            assert response.status == 200
        with pytest.raises(aiohttp.WSServerHandshakeError) as cross:
            await client.ws_connect(ws_url, origin="http://evil.example")
        assert cross.value.status == 403


def _status(url: str) -> int:
    """The HTTP status of a GET (403 included)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_serve_prints_one_url_with_its_key_on_a_free_port(tmp_path: Path) -> None:
    env = {**os.environ, "GE_CONSOLE_STATE_DIR": str(tmp_path)}
    command = [sys.executable, "-m", "triton_ge_console.cli", "serve"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                              start_new_session=True, text=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:(\d+))/\?key=(\S+)", line)
        assert found is not None, line
        base, port, key = found.group(1), int(found.group(2)), found.group(3)
        assert port != 8000
        tick, status = threading.Event(), 0
        for _ in range(300):  # until the server has bound its port (it prints the URL first)
            try:
                status = _status(f"{base}/")
                break
            except OSError:
                tick.wait(0.1)
        assert status == 403
        assert _status(f"{base}/?key={key}") == 200
    finally:
        server.terminate()
        rest, _ = server.communicate(timeout=20)
    urls = re.findall(r"https?://\S+", line + rest)  # one URL, with its key: one without it answers 403
    assert urls == [f"{base}/?key={key}"], line + rest
