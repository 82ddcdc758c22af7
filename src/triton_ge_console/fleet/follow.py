"""Follow a fleet: every member polled again and again at its own pace on a bounded pool, each snapshot
handed on as soon as it arrives, so a slow or dead server delays no other's figures. `sample` is the same
follower run for a few polls under a deadline (`status --all`)."""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from triton_ge_console.sessions.observe.snapshot import ServerSnapshot
from triton_ge_console.sessions.observe.source import Pollable

Deliver = Callable[[str, ServerSnapshot], object]
STOP_CHECK_S = 0.2  # how soon a stop request is noticed while every poll is still out


class FleetFollower:
    """Polls each source `interval_s` after the start of its previous poll (`backoff_s` after one that did
    not answer; never again when it is None), with at most `max_workers` polls out at once."""

    def __init__(self, sources: Sequence[Pollable], *, interval_s: float = 1.0,
                 backoff_s: float | None = 5.0, max_workers: int = 8, max_polls: int | None = None) -> None:
        self.sources = list(sources)
        self.interval_s = interval_s
        self.backoff_s = None if backoff_s is None else max(backoff_s, interval_s)
        self.max_polls = max_polls  # per source; None: until stopped (recordings in tests stop)
        self.max_workers = max(1, min(max_workers, len(self.sources) or 1))

    def run(self, deliver: Deliver, stop: threading.Event) -> None:
        """Poll until `stop` is set (or every source had max_polls); blocks, so run it in a worker thread."""
        pool = ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="ge-fleet-follow")
        due = [(time.monotonic(), index) for index in range(len(self.sources))]
        counts = [0] * len(self.sources)
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
                    deliver(self.sources[index].name, snapshot)
                    counts[index] += 1
                    wait_s = self.interval_s if snapshot.live else self.backoff_s
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
        follower = FleetFollower(sources, interval_s=interval_s, backoff_s=None, max_workers=max_workers,
                                 max_polls=polls)
        follower.run(lambda name, snapshot: taken[name].append(snapshot), stop)
    finally:
        deadline.cancel()
    return taken


def _result(future: Future[ServerSnapshot], name: str) -> ServerSnapshot:
    """The poll's snapshot; a source that broke its promise never to raise gives an error snapshot."""
    try:
        return future.result()
    except Exception as exc:
        return ServerSnapshot(taken_at=time.time(), session=name, error=f"{type(exc).__name__}: {exc}")
