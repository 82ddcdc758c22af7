"""A console ends as quitting ends it (stopping the server it started) when it is killed (SIGTERM) or its
terminal closes (SIGHUP), even while busy; served to a browser, it never outlives its `serve`.

Left alone, both signals end a terminal console at once, its server left running; textual's web driver
handles SIGTERM through the event loop, so a loop kept busy (a resize storm's reflows) never sees it. Here
the signal asks the app to exit, and a second one (raised by us after a grace period) ends the process
from the signal handler itself; a thread watches the `serve` process and raises that SIGTERM when it is
gone. Ours are raised in the main thread's handler (`_thread.interrupt_main`), never sent as signals.

The lifeline is released when the app ends however it ends: a killed `serve` breaks the console's pipe, and
`App.run` then raises without unmounting. Released, it raises nothing more, and further SIGTERM and SIGHUP
are let be, so the console's cleanup (stopping the server it started) runs to its end.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import threading
from types import FrameType
from typing import Any

from triton_ge_console.sessions.server.registry import process_start_ticks

SERVE_PID_ENV = "GE_CONSOLE_SERVE_PID"  # set by `ge-console serve` for the consoles it starts
STOP_GRACE_S = 3.0  # a graceful exit gets this long before the signal handler ends the process
LAST_RESORT_S = 3.0  # and this long more before os._exit, should the main thread be stuck outside Python
WATCH_EVERY_S = 0.25
UNWINDING = (signal.SIGTERM, signal.SIGHUP)  # a kill, a closed terminal
WAKE = signal.SIGURG  # its default action is to ignore it


def serve_pid() -> int | None:
    """The `serve` process this console was started for, from the environment."""
    text = os.environ.get(SERVE_PID_ENV, "")
    return int(text) if text.isdigit() else None


class Lifeline:
    """SIGTERM and SIGHUP that end the app even while its loop is busy; an end when `serve` goes."""

    def __init__(self, app: Any, parent: int | None) -> None:
        self.app = app
        self.parent = parent
        self._parent_started = process_start_ticks(parent) if parent is not None else None
        self._asked = False
        self._released = threading.Event()
        self._sending = threading.RLock()  # a signal of ours is raised only while not released
        self._loop: Any = None

    def hold(self) -> None:
        """Take over SIGTERM and SIGHUP (main thread only), and watch the parent; the app must be running."""
        import asyncio

        self._loop = asyncio.get_running_loop()
        for signum in UNWINDING:
            signal.signal(signum, self._on_signal)
        signal.signal(WAKE, _let_be)  # caught, so it interrupts a blocking call in the main thread
        if self.parent is not None:
            threading.Thread(target=self._watch_parent, name="ge-serve-watch", daemon=True).start()

    def release(self) -> None:
        """The app has ended: what follows (stopping a server it started) runs to its end, undisturbed. A
        closed terminal sends SIGHUP more than once (the kernel and the shell), so further signals are let
        be rather than given back their fatal default (the loop's close may have done so already)."""
        with self._sending:
            self._released.set()
        for signum in UNWINDING:
            with contextlib.suppress(ValueError):  # off the main thread: nothing to change
                signal.signal(signum, _let_be)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        """First time: ask the app to exit, and insist later; second time: leave now (not once released)."""
        if self._released.is_set():
            return
        if self._asked:  # the main thread runs Python, so it unwinds: cleanups (stopping a server) finish
            self.release()
            raise SystemExit(128 + signum)
        self._asked = True
        with contextlib.suppress(RuntimeError):  # the loop may be closing already
            self._loop.call_soon_threadsafe(self.app.exit)
        threading.Thread(target=self._insist, args=(signum,), name="ge-stop", daemon=True).start()

    def _insist(self, signum: int) -> None:
        """The app still runs after the grace: signal again (the handler then exits), and at last end hard."""
        if self._released.wait(STOP_GRACE_S) or not self._send(signum):
            return
        if not self._released.wait(LAST_RESORT_S):
            os._exit(128 + signum)

    def _watch_parent(self) -> None:
        """SIGTERM ourselves once the serving process is gone (killed, or its pid now someone else's)."""
        while not self._released.wait(WATCH_EVERY_S):
            started = process_start_ticks(self.parent) if self.parent is not None else None
            if started is None or started != self._parent_started:
                self._send(signal.SIGTERM)
                return

    def _send(self, signum: int) -> bool:
        """Run our handler in the main thread as if signalled, unless released meanwhile; whether done. The
        signal itself is never sent: should the handler be gone with the loop, nothing happens (no fatal
        default). WAKE (ignored by default, so never fatal either) then breaks a blocking call in the main
        thread, so the handler runs at once."""
        with self._sending:
            if self._released.is_set():
                return False
            _thread.interrupt_main(signal.Signals(signum))
            signal.pthread_kill(threading.main_thread().ident or 0, WAKE)
            return True


def _let_be(_signum: int, _frame: FrameType | None) -> None:
    """A signal after the app ended: the cleanup goes on. (Caught, unlike SIG_IGN, so a server started
    afterwards does not inherit it.)"""


def run_released(app: Any) -> Any:
    """Run the app (in a terminal, on the driver that resumes only what it suspended); however it ends,
    release its lifeline before the caller's cleanup."""
    from textual.drivers.linux_driver import LinuxDriver

    from triton_ge_console.console.terminal_driver import TerminalDriver

    if app.driver_class is LinuxDriver:  # not a browser's driver (textual-serve names its own)
        app.driver_class = TerminalDriver
    try:
        return app.run()
    finally:
        if app.lifeline is not None:
            app.lifeline.release()


def hold_for(app: Any) -> Lifeline | None:
    """Install the lifeline from the app's mount: in a terminal or a browser, not in a headless run (tests
    drive the app in their own process) nor off the main thread (signal handlers cannot be set there)."""
    if app.is_headless or threading.current_thread() is not threading.main_thread():
        return None
    lifeline = Lifeline(app, serve_pid())
    lifeline.hold()
    return lifeline


class SignalsUnwind:
    """For a console without an app (the headless demo): in its block the first SIGTERM or SIGHUP raises
    SystemExit in the main thread, so the block's cleanup (stopping the server it started) runs; once that
    cleanup has begun (`settle`), signals are let be, so a second one cannot cut it short."""

    def __init__(self) -> None:
        self._settled = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> SignalsUnwind:
        if threading.current_thread() is threading.main_thread():
            self._previous = {signum: signal.signal(signum, self._unwind) for signum in UNWINDING}
        return self

    def settle(self) -> None:
        """The cleanup begins: from now on a signal does nothing."""
        self._settled = True

    def _unwind(self, signum: int, _frame: FrameType | None) -> None:
        """Raise once, outside the cleanup."""
        if not self._settled:
            self._settled = True
            raise SystemExit(128 + signum)

    def __exit__(self, *_exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
