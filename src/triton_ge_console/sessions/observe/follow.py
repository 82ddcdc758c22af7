"""The one poll loop: sources polled again and again, each at its own pace on a bounded pool, each snapshot
handed on as soon as it arrives (so a slow or dead server delays no other's figures), a source that does not
answer asked again only after a backoff. The console, the notebook dashboards and the fleet views all run it;
`sample` is the same loop run for a few polls under a deadline (`status --all`)."""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from triton_ge_console.sessions.observe.snapshot import ServerSnapshot
from triton_ge_console.sessions.observe.source import Pollable

LOG = logging.getLogger(__name__)
Deliver = Callable[[str, ServerSnapshot], object]
STOP_CHECK_S = 0.2  # how soon a stop request is noticed while every poll is still out


class Follower:
    """Polls each source `interval_s` after the start of its previous poll; after one that did not answer,
    `backoff_s` later (never again when it is None; `doubling`: the interval doubled for each such poll in a
    row, up to `backoff_s`), with at most `max_workers` polls out at once."""

    def __init__(self, sources: Sequence[Pollable], *, interval_s: float = 1.0,
                 backoff_s: float | None = 5.0, doubling: bool = False, max_workers: int = 8,
                 max_polls: int | None = None) -> None:
        self.sources = list(sources)
        self.interval_s = interval_s
        self.backoff_s = None if backoff_s is None else max(backoff_s, interval_s)
        self.doubling = doubling
        self.max_polls = max_polls  # per source; None: until stopped (recordings in tests stop)
        self.max_workers = max(1, min(max_workers, len(self.sources) or 1))

    def wait_after(self, snapshot: ServerSnapshot, failed_in_a_row: int) -> float | None:
        """Seconds from a poll's start to the source's next one (None: never again)."""
        if snapshot.live:
            return self.interval_s
        if self.backoff_s is None or not self.doubling:
            return self.backoff_s
        return min(self.interval_s * 2 ** (failed_in_a_row - 1), self.backoff_s)

    def run(self, deliver: Deliver, stop: threading.Event) -> None:
        """Poll until `stop` is set (or every source had max_polls); blocks, so run it in a worker thread.
        A deliver that raises is logged and polling goes on: every view depends on it."""
        pool = ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="ge-follow")
        due = [(time.monotonic(), index) for index in range(len(self.sources))]
        counts, failed = [0] * len(self.sources), [0] * len(self.sources)
        out: dict[Future[ServerSnapshot], tuple[int, float]] = {}
        try:
            while (due or out) and not stop.is_set():
                now = time.monotonic()
                while due and due[0][0] <= now:
                    index = heapq.heappop(due)[1]
                    out[pool.submit(self.sources[index].poll)] = (index, now)
                pause = max(0.0, min(due[0][0] - now if due else STOP_CHECK_S, STOP_CHECK_S))
                if not out:
                    stop.wait(pause)
                    continue
                done, _ = wait(out, timeout=pause, return_when=FIRST_COMPLETED)
                for future in done:
                    index, began = out.pop(future)
                    snapshot = _result(future, self.sources[index].name)
                    _hand_on(deliver, self.sources[index].name, snapshot)
                    counts[index] += 1
                    failed[index] = 0 if snapshot.live else failed[index] + 1
                    wait_s = self.wait_after(snapshot, failed[index])
                    if wait_s is not None and (self.max_polls is None or counts[index] < self.max_polls):
                        heapq.heappush(due, (began + wait_s, index))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # a poll still hanging ends at its HTTP timeout


def sample(sources: Sequence[Pollable], *, polls: int = 2, interval_s: float = 1.0,
           deadline_s: float = 10.0, max_workers: int = 8) -> dict[str, list[ServerSnapshot]]:
    """Each source's snapshots, oldest first: `polls` of them (one, from a server that did not answer), or
    what came back by the deadline."""
    taken: dict[str, list[ServerSnapshot]] = {source.name: [] for source in sources}
    stop = threading.Event()
    deadline = threading.Timer(deadline_s, stop.set)
    deadline.start()
    try:
        follower = Follower(sources, interval_s=interval_s, backoff_s=None, max_workers=max_workers,
                            max_polls=polls)
        follower.run(lambda name, snapshot: taken[name].append(snapshot), stop)
    finally:
        deadline.cancel()
    return taken


def _hand_on(deliver: Deliver, name: str, snapshot: ServerSnapshot) -> None:
    """deliver(name, snapshot); a view's bug is logged, never ends the polling."""
    try:
        deliver(name, snapshot)
    except Exception:
        LOG.exception("snapshot hand-off failed; polling goes on")


def _result(future: Future[ServerSnapshot], name: str) -> ServerSnapshot:
    """The poll's snapshot; a source that broke its promise never to raise gives an error snapshot."""
    try:
        return future.result()
    except Exception as exc:
        return ServerSnapshot(taken_at=time.time(), session=name, error=f"{type(exc).__name__}: {exc}")
