"""CLI: `ge-console [console]` opens the console, `demo` runs the demo, `serve` serves it to a browser."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triton_ge_console.arg_types import error_line, port_number, seconds

if TYPE_CHECKING:
    from triton_ge_console.console.launch_session import OpenedSession
    from triton_ge_console.console.options import ConsoleOptions
    from triton_ge_console.sessions.server.registry import Registry, SessionRecord

DEFAULT_HEADLESS_S = 120.0
FLEET_RESCAN_S = 5.0  # the fleet screen looks for sessions (and pods) that came or went this often


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add `console`, `demo` and `serve`."""
    console = subparsers.add_parser("console", help="the live console (what bare `ge-console` opens)")
    _add_console_arguments(console)
    console.set_defaults(func=run_console)
    demo = subparsers.add_parser("demo", help="serve the demo models in CPU emulation and open the console")
    demo.add_argument("--keep", action="store_true", help="leave the demo server running on quit")
    demo.add_argument("--headless", type=float, metavar="SECONDS", default=None,
                      help="no UI: wait up to SECONDS for live figures, print the dashboard as text, stop")
    demo.add_argument("--rate", type=float, default=4.0, help="background requests per second per model")
    demo.set_defaults(func=run_demo)
    serve = subparsers.add_parser("serve", help="serve the console to a browser on loopback (textual-serve)")
    _add_console_arguments(serve)
    serve.add_argument("--port", type=port_number, default=None,
                       help="loopback port for the browser (default: a free one; 8000 is Triton's)")
    serve.set_defaults(func=run_serve)


def _add_console_arguments(parser: argparse.ArgumentParser) -> None:
    """What to open: a session, a spec or repository, or nothing (the start screen)."""
    parser.add_argument("target", nargs="?", type=Path, default=None,
                        help="a spec file or model repository to launch and open")
    parser.add_argument("--session", "-s", default=None, help="open this registered session")
    parser.add_argument("--name", default=None, help="session name when launching TARGET")
    parser.add_argument("--interval", type=seconds, default=1.0, help="refresh interval, seconds (default 1)")
    parser.add_argument("--keep", action="store_true", help="leave a server it started running on quit")


def _has_terminal() -> bool:
    """Whether a full-screen UI can run here: a TTY, or a browser through textual-serve's web driver."""
    if os.environ.get("TEXTUAL_DRIVER", "").endswith("WebDriver"):
        return True
    return sys.stdin.isatty() and sys.stdout.isatty()


def run_console(args: argparse.Namespace) -> int:
    """Open the console on a session, a launched spec/repository, or the start screen."""
    if args.interval <= 0:
        return error_line(f"--interval {args.interval}: must be positive", 2)
    if not _has_terminal():
        return error_line("the console needs a terminal; without one use `ge-console status` or "
                          "`demo --headless`")
    what = f" on session '{args.session}'" if args.session else f" on {args.target}" if args.target else ""
    _say_opening(f"opening the console{what} …")
    from triton_ge_console.console.launch_session import open_record, open_target, running_sessions
    from triton_ge_console.sessions.server.registry import Registry, RegistryError, SessionNotFound

    registry = Registry()
    try:
        if args.session:
            return _run_opened(open_record(registry.load(args.session), registry, args.interval), args.keep)
        if args.target is not None:
            if not args.target.exists():
                return error_line(f"{args.target}: no such spec file or model repository", 2)
            return _run_opened(open_target(args.target, registry, args.interval, args.name), args.keep)
        running = running_sessions(registry)
        if len(running) == 1:
            return _run_opened(open_record(running[0], registry, args.interval), args.keep)
        if len(running) > 1:
            return _run_fleet(running, registry, args.interval)
    except (SessionNotFound, RegistryError) as exc:
        return error_line(str(exc))
    return _run_start_screen(registry, args)


def _say_opening(line: str) -> None:
    """One line on the terminal before the console's imports (seconds on a loaded host), so it is never
    blank meanwhile; the app's screen then covers it. Not under `serve`, whose driver owns stdout."""
    if sys.stdout.isatty():
        print(line, flush=True)


def _say_after(message: str) -> None:
    """What the console did on its way out: the terminal (or `serve`) it ran in may be gone by then."""
    with contextlib.suppress(OSError):  # EIO from a closed terminal, EPIPE from a killed serve
        print(message, flush=True)


def _run_app(app: Any) -> Any:
    """Run a console app; its lifeline (terminal or browser) is released however the run ends."""
    from triton_ge_console.console.lifeline import run_released

    return run_released(app)


def _run_opened(opened: OpenedSession, keep: bool) -> int:
    """Run the app; stop what it started unless kept."""
    from triton_ge_console.console.app import GEConsoleApp

    app = GEConsoleApp(opened.source, opened.options)
    try:
        _run_app(app)
    finally:
        opened.source.close()
        if opened.started_here and not keep and opened.lifecycle.record is not None:
            _say_after(opened.lifecycle.stop().message)
    return 1 if app.return_code else 0


def _run_fleet(records: list[SessionRecord], registry: Registry, interval: float) -> int:
    """The fleet screen over every running session; quitting leaves every server running."""
    from triton_ge_console.console.fleet_app import FleetConsoleApp
    from triton_ge_console.console.launch_session import record_options
    from triton_ge_console.console.options import FleetOptions
    from triton_ge_console.fleet.members import FleetMember, LiveFleet
    from triton_ge_console.sessions.pending import RecordLifecycle

    def options_for(member: FleetMember) -> ConsoleOptions:
        assert member.record is not None
        return record_options(member.record, RecordLifecycle(registry, member.record), interval)

    fleet = LiveFleet(records, registry)
    app = FleetConsoleApp(fleet, options_for, FleetOptions(interval_s=interval, backoff_s=max(5.0, interval),
                                                           rescan_s=FLEET_RESCAN_S))
    try:
        _run_app(app)
    finally:
        fleet.close()
    return 1 if app.return_code else 0


def _run_start_screen(registry: Registry, args: argparse.Namespace) -> int:
    """The chooser; then open whatever was chosen."""
    from triton_ge_console.console.launch_session import open_record, open_target, running_sessions
    from triton_ge_console.console.screens.start import SessionEntry, StartApp
    from triton_ge_console.sessions.server.registry import effective_state

    entries = [SessionEntry(r.name, effective_state(r), r.http_url) for r in running_sessions(registry)]
    app = StartApp(entries)
    choice = _run_app(app)
    if choice is None:
        return 0
    if choice.kind == "demo":
        return _run_demo_ui(keep=args.keep, rate=4.0, interval=args.interval)
    if choice.kind == "session":
        return _run_opened(open_record(registry.load(choice.value), registry, args.interval), args.keep)
    return _run_opened(open_target(Path(choice.value), registry, args.interval, None), args.keep)


def run_demo(args: argparse.Namespace) -> int:
    """The demo: in the console, or headless when asked or when there is no terminal."""
    if args.headless is not None and args.headless <= 0:
        return error_line(f"--headless {args.headless}: must be a positive number of seconds", 2)
    if args.headless is not None or not _has_terminal():
        from triton_ge_console.console.demo import run_headless

        seconds = args.headless or DEFAULT_HEADLESS_S
        if args.headless is None:
            print(f"no terminal (stdin/stdout is not a TTY): running the demo headless for up to "
                  f"{seconds:g}s", flush=True)
        return run_headless(seconds, keep=args.keep, rate_per_s=args.rate)
    _say_opening("opening the console on the demo …")
    return _run_demo_ui(keep=args.keep, rate=args.rate, interval=1.0)


def _run_demo_ui(keep: bool, rate: float, interval: float) -> int:
    """The demo in the console; quitting stops the load and (unless kept) the server."""
    from triton_ge_console.console.app import create_app
    from triton_ge_console.console.demo import demo_repository_dir, demo_thresholds, new_demo_session
    from triton_ge_console.console.launch_session import reload_changed_for
    from triton_ge_console.console.options import ConsoleOptions

    session = new_demo_session()
    options = ConsoleOptions(
        interval_s=interval, repository=demo_repository_dir(), thresholds=demo_thresholds(),
        server=session.lifecycle, startup=lambda say: session.start(say, rate),
        reload_changed=reload_changed_for(session.lifecycle),
    )
    app = create_app(session.pending, options=options)
    try:
        _run_app(app)
    finally:
        message = session.close(keep)
        if message:
            _say_after(message)
    return 1 if app.return_code else 0


def run_serve(args: argparse.Namespace) -> int:
    """The console in a browser (textual-serve) on a free loopback port, behind a per-run key."""
    import secrets

    from triton_ge_console.console.lifeline import SERVE_PID_ENV
    from triton_ge_console.sessions.server.process import free_port

    command = [sys.executable, "-m", "triton_ge_console.cli", "console", "--interval", str(args.interval)]
    if args.session:
        command += ["--session", args.session]
    if args.target is not None:
        command += [str(args.target.resolve())]
    if args.name:
        command += ["--name", args.name]
    if args.keep:
        command.append("--keep")
    port = args.port or free_port()
    key = secrets.token_urlsafe(24)
    os.environ[SERVE_PID_ENV] = str(os.getpid())  # each console watches us and ends when we do
    print(f"serving the console on http://127.0.0.1:{port}/?key={key} (ctrl+c stops)", flush=True)
    try:  # exec: the console is our own child (no shell between), so stopping it reaches it
        keyed_server(f"exec {shlex.join(command)}", key, port).serve()
    finally:
        stop_consoles()
    return 0


def stop_consoles(grace_s: float = 5.0) -> None:
    """SIGTERM every console this `serve` started, SIGKILL those still there after grace_s."""
    import psutil

    children = psutil.Process().children(recursive=True)
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _gone, alive = psutil.wait_procs(children, timeout=grace_s)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()


SERVE_COOKIE = "ge_console_key"


def keyed_server(command: str, key: str, port: int) -> Any:
    """textual-serve's Server on 127.0.0.1, answering only requests that carry the run's key."""
    import psutil
    from aiohttp import web
    from textual_serve.server import Server

    class KeyedServer(Server):  # type: ignore[misc]
        """Adds the key guard to textual-serve's aiohttp application (textual-serve has no auth)."""

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(key_guard(key))
            return app

        async def on_startup(self, app: web.Application) -> None:
            """Say nothing: textual-serve's banner gives the URL without the key (a 403); ours has it."""

        def initialize_logging(self) -> None:
            super().initialize_logging()
            for handler in logging.getLogger().handlers:  # the access log would print every ?key=
                handler.addFilter(redact_keys)

        def request_exit(self) -> None:
            """Stop the consoles first: textual-serve waits for each to end before it exits."""
            for child in psutil.Process().children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    child.terminate()
            super().request_exit()

    return KeyedServer(command, host="127.0.0.1", port=port, title="GE Console")


_KEY_IN_URL = re.compile(r"(?<=[?&]key=)[^&\s\"']+")


def redact_keys(record: logging.LogRecord) -> bool:
    """A logging filter: the serve key never reaches a log line (aiohttp logs each request's URL)."""
    message = record.getMessage()
    if "key=" in message:
        record.msg, record.args = _KEY_IN_URL.sub("…", message), ()
    return True


def key_guard(key: str) -> Any:
    """Middleware: any local user can reach loopback, so every request needs the key (or its cookie)."""
    import hmac

    from aiohttp import web

    def matches(value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value.encode(), key.encode())

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() == "websocket" and not _same_origin(request):
            raise web.HTTPForbidden(text="cross-origin websocket refused")
        from_query = matches(request.query.get("key"))
        if not from_query and not matches(request.cookies.get(SERVE_COOKIE)):
            raise web.HTTPForbidden(text="open the URL with the key `ge-console serve` printed")
        response: web.StreamResponse = await handler(request)
        if from_query and not response.prepared:
            response.set_cookie(SERVE_COOKIE, key, httponly=True, samesite="Strict", path="/")
        return response

    return guard


def _same_origin(request: Any) -> bool:
    """Whether a websocket upgrade comes from a page of this server (Origin host:port equals Host)."""
    from urllib.parse import urlsplit

    origin = request.headers.get("Origin")
    return bool(origin) and urlsplit(origin).netloc == request.host
