"""The lifeline's own second signal reaches a main thread blocked in a system call (it is raised in the
handler, never sent, and a harmless WAKE signal breaks the call)."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from triton_ge_console.console.lifeline import STOP_GRACE_S, UNWINDING, WAKE, Lifeline


class _App:
    """What the lifeline asks of an app: an exit it can request."""

    def __init__(self) -> None:
        self.exits = 0

    def exit(self) -> None:
        self.exits += 1


async def test_a_main_thread_blocked_in_a_call_is_ended_by_the_second_signal() -> None:
    saved = {signum: signal.getsignal(signum) for signum in (*UNWINDING, WAKE)}
    app = _App()
    lifeline = Lifeline(app, None)
    lifeline.hold()
    try:
        threading.Timer(0.2, lambda: lifeline._send(signal.SIGTERM)).start()  # as the serve watcher does
        started = time.monotonic()
        with pytest.raises(SystemExit) as ended:
            time.sleep(STOP_GRACE_S + 30)  # the app never exits: the lifeline insists after its grace
        assert ended.value.code == 128 + signal.SIGTERM
        assert time.monotonic() - started < STOP_GRACE_S + 15, "the blocked call was not broken"
    finally:
        lifeline.release()
        for signum, handler in saved.items():
            signal.signal(signum, handler)
