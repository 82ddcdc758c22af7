"""The fleet follower's schedule, with in-process sources whose answers and delays the tests choose: each
member at its own pace, a slow or dead one delaying no other, and `sample` ending once every member has
answered (or at its deadline)."""

from __future__ import annotations

import threading
import time
from typing import Any, cast

from tests.waiting import wait_until
from triton_ge_console.sessions.observe.follow import Follower, sample
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot
from triton_ge_console.sessions.observe.source import SessionSource


class TimedSource:
    """Answers every poll after `delay_s`, live or not, and remembers when each poll began."""

    def __init__(self, name: str, *, live: bool = True, delay_s: float = 0.0, fails: bool = False) -> None:
        self.name = name
        self.live = live
        self.delay_s = delay_s
        self.fails = fails
        self.began: list[float] = []
        self.released = threading.Event()

    def poll(self) -> ServerSnapshot:
        self.began.append(time.monotonic())
        self.released.wait(self.delay_s)
        if self.fails:
            raise RuntimeError("broken source")
        return ServerSnapshot(taken_at=time.time(), session=self.name, live=self.live, ready=self.live,
                              error=None if self.live else "connection refused")

    def close(self) -> None:
        self.released.set()


def sources(*members: TimedSource) -> list[SessionSource]:
    """The test sources as the follower sees them."""
    return [cast(SessionSource, member) for member in members]


def test_sample_ends_when_every_member_answered() -> None:
    """Two polls of a live member, one of a member that did not answer, well before the deadline."""
    live, dead = TimedSource("live"), TimedSource("dead", live=False)
    began = time.monotonic()
    taken = sample(sources(live, dead), polls=2, interval_s=0.2, deadline_s=10.0)
    assert [s.live for s in taken["live"]] == [True, True]
    assert [s.live for s in taken["dead"]] == [False]
    assert live.began[1] - live.began[0] >= 0.18  # due one interval after the first was handed out
    assert time.monotonic() - began < 5.0


def test_sample_keeps_what_came_back_by_the_deadline() -> None:
    """A member that hangs has no snapshot; the others have theirs; the deadline is kept."""
    quick, hung = TimedSource("quick"), TimedSource("hung", delay_s=30.0)
    began = time.monotonic()
    try:
        taken = sample(sources(quick, hung), polls=2, interval_s=0.1, deadline_s=1.0)
    finally:
        hung.close()
    assert len(taken["quick"]) == 2 and taken["hung"] == []
    assert time.monotonic() - began < 3.0


def test_a_source_that_raises_gives_an_error_snapshot() -> None:
    """A broken promise never to raise is reported as that member's error, not lost."""
    taken = sample(sources(TimedSource("broken", fails=True)), polls=1, deadline_s=5.0)
    (snapshot,) = taken["broken"]
    assert snapshot.error == "RuntimeError: broken source" and not snapshot.live


def test_slow_member_delays_no_other_and_dead_one_backs_off() -> None:
    """With two workers, the quick member keeps its interval while the slow one's poll is out; the dead
    member is asked again only after the backoff."""
    quick, slow = TimedSource("quick"), TimedSource("slow", delay_s=2.0)
    dead = TimedSource("dead", live=False)
    seen: list[tuple[str, Any]] = []
    stop = threading.Event()
    follower = Follower(sources(quick, slow, dead), interval_s=0.1, backoff_s=0.6, max_workers=2)
    worker = threading.Thread(target=follower.run, args=(lambda name, s: seen.append((name, s)), stop))
    began = time.monotonic()
    worker.start()
    try:
        wait_until(lambda: len(quick.began) >= 5, timeout=5.0, what="five polls of the quick member")
        quick_done = time.monotonic() - began
    finally:
        stop.set()
        slow.close()
        worker.join(timeout=5)
    assert not worker.is_alive()
    assert quick_done < 2.0 and len(slow.began) == 1  # the slow member's one poll was still out
    gaps = [b - a for a, b in zip(dead.began, dead.began[1:], strict=False)]
    assert dead.began and all(gap >= 0.55 for gap in gaps)
