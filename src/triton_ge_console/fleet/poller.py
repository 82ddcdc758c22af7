"""Poll many sessions at once: bounded workers, each session at its own pace, so a slow or dead server
delays no other's figures (there is no round that waits for the slowest)."""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from triton_ge_console.sessions.snapshot import ServerSnapshot
from triton_ge_console.sessions.source import SessionSource

DEFAULT_WORKERS = 8


def _timed_poll(source: SessionSource) -> tuple[float, ServerSnapshot]:
    """When the poll began (monotonic) and what it saw."""
    began = time.monotonic()
    return began, source.poll()


class FleetPoller:
    """Samples every source `polls` times, `interval_s` apart from the start of its own previous poll."""

    def __init__(self, sources: Sequence[SessionSource], max_workers: int = DEFAULT_WORKERS) -> None:
        self.sources = list(sources)
        workers = max(1, min(max_workers, len(self.sources)))
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ge-fleet")

    def sample(self, polls: int = 2, interval_s: float = 1.0,
               deadline_s: float = 10.0) -> dict[str, list[ServerSnapshot]]:
        """Each source's snapshots, oldest first: `polls` of them (one, from a server that did not answer),
        or what came back by the deadline."""
        results: dict[str, list[ServerSnapshot]] = {s.name: [] for s in self.sources}
        now = time.monotonic()
        end = now + deadline_s
        due = [(now, index) for index in range(len(self.sources))]
        running: dict[Future[tuple[float, ServerSnapshot]], int] = {}
        while (due or running) and now < end:
            while due and due[0][0] <= now:
                index = heapq.heappop(due)[1]
                running[self._pool.submit(_timed_poll, self.sources[index])] = index
            next_due = due[0][0] if due else end
            done, _ = wait(running, timeout=max(0.0, min(next_due, end) - now), return_when=FIRST_COMPLETED)
            for future in done:
                index = running.pop(future)
                began, snapshot = future.result()
                taken = results[self.sources[index].name]
                taken.append(snapshot)
                if len(taken) < polls and snapshot.live:  # a server that did not answer is not asked again
                    heapq.heappush(due, (began + interval_s, index))
            now = time.monotonic()
        return results

    def close(self) -> None:
        """Stop handing out polls; one still hanging ends at its own HTTP timeout. Closes the sources."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        for source in self.sources:
            source.close()
