"""The load loops and measurement windows: closed loop (concurrency) and open loop (request rate).

All of it runs on one asyncio loop. Latency in rate mode is measured from each request's *scheduled*
send instant, so a server (or generator) falling behind shows up in the percentiles instead of being
hidden by sending later (coordinated omission).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from triton_ge_console.sessions.loadgen.transport import InferenceFailed, LoadError, StatsTotals, Transport

clock = time.perf_counter
# How Triton answers a request its queue policy refused (scheduler_utils.cc): the queue was full at arrival,
# or the request's timeout expired while it waited. Neither is the model failing, so each is counted apart.
QUEUE_FULL = "Exceeds maximum queue size"
TIMED_OUT = "Request timeout expired"
DRAIN_S = 2.0  # at a step's end, requests in flight get this long to come back before they are cancelled


class StopRequested(Exception):
    """The caller asked the run to stop."""


class Recorder:
    """Latencies (seconds) of requests completed since the last swap; appended from the load loops."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors = 0
        self.sent = 0
        self.first_error: str | None = None
        self.rejected = 0  # the whole step's queue-full refusals (not swapped: every one sent counts)
        self.timed_out = 0  # the whole step's requests whose queue timeout expired

    def add(self, latency: float) -> None:
        """Record one successful request's latency (seconds)."""
        self.latencies.append(latency)

    def fail(self, exc: BaseException) -> None:
        """Count a failed request, keeping the first message."""
        self.fail_text(str(exc))

    def fail_text(self, message: str) -> None:
        """Count a failed request described by message (a queue refusal apart), keeping the first error."""
        if QUEUE_FULL in message:
            self.rejected += 1
            return
        if TIMED_OUT in message:
            self.timed_out += 1
            return
        self.errors += 1
        if self.first_error is None:
            self.first_error = message

    def swap(self) -> tuple[list[float], int, int]:
        """Hand over (latencies, errors, sent) since the last swap and start afresh."""
        taken = (self.latencies, self.errors, self.sent)
        self.latencies, self.errors, self.sent = [], 0, 0
        return taken


@dataclass
class Window:
    """One measurement window: client-side latencies and the server's counters at both ends."""

    duration_s: float
    latencies: list[float]
    errors: int
    sent: int
    cpu_s: float
    stats_before: StatsTotals | None
    stats_after: StatsTotals | None

    @property
    def throughput(self) -> float:
        """Successful requests per second."""
        return len(self.latencies) / self.duration_s if self.duration_s > 0 else 0.0


# A run that never settles (stable_windows huge, e.g. a background load) keeps only this many windows.
MAX_KEPT_WINDOWS = 120


@dataclass
class StepResult:
    """The step's most recent windows (bounded), how many it measured, and whether the last were stable."""

    kept: int = MAX_KEPT_WINDOWS
    windows: deque[Window] = field(default_factory=deque)
    measured: int = 0
    stable: bool = False

    def add(self, window: Window) -> None:
        """Keep a window, dropping the oldest past `kept`."""
        self.windows.append(window)
        self.measured += 1
        if len(self.windows) > self.kept:
            self.windows.popleft()

    def last(self, count: int) -> list[Window]:
        """The newest `count` windows, oldest first."""
        return list(self.windows)[-count:]


class LoadLoops:
    """Runs load against one prepared transport and measures it in windows."""

    def __init__(self, transport: Transport, model: str, stop: threading.Event | None = None) -> None:
        self.transport = transport
        self.model = model
        self.recorder = Recorder()
        self.stop = stop
        self.draining = False  # set at the step's end: no new request is sent
        self._tasks: set[asyncio.Task[None]] = set()

    def running(self) -> bool:
        """Whether the loops may send another request."""
        return not self.draining

    async def closed_loop(self) -> None:
        """One virtual user: send, wait for the answer, send again (the transport's fastest way)."""
        await self.transport.closed_loop(self.recorder.add, self.recorder.fail_text, self.running)

    async def drain(self, loops: list[asyncio.Task[None]]) -> None:
        """Send nothing more and let requests in flight come back (a stop request waits for none)."""
        self.draining = True
        pending = [*loops, *self._tasks]
        stopped = self.stop is not None and self.stop.is_set()
        if pending and not stopped:
            await asyncio.wait(pending, timeout=DRAIN_S)

    async def open_loop(self, intervals: Callable[[], float], max_inflight: int) -> None:
        """Send on schedule whatever the answers do; at max_inflight, later sends wait but keep their time."""
        gate = asyncio.Semaphore(max_inflight)
        due = clock()
        while not self.draining:
            now = clock()
            while due <= now:
                await gate.acquire()
                task = asyncio.create_task(self._timed_send(due, gate))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                due += intervals()
            await asyncio.sleep(max(0.0, due - clock()))

    async def _timed_send(self, scheduled: float, gate: asyncio.Semaphore) -> None:
        """One open-loop request, timed from its scheduled instant."""
        self.recorder.sent += 1
        try:
            await self.transport.infer()
        except InferenceFailed as exc:
            self.recorder.fail(exc)
        else:
            self.recorder.latencies.append(clock() - scheduled)
        finally:
            gate.release()

    async def cancel_sends(self) -> None:
        """Cancel open-loop requests still in flight."""
        pending = list(self._tasks)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def pause(self, seconds: float) -> None:
        """Sleep, waking every 100 ms to honour a stop request."""
        deadline = clock() + seconds
        while (left := deadline - clock()) > 0:
            if self.stop is not None and self.stop.is_set():
                raise StopRequested
            await asyncio.sleep(min(left, 0.1))
        if self.stop is not None and self.stop.is_set():
            raise StopRequested

    async def warm_up(self, seconds: float) -> None:
        """Run the load unmeasured; fail fast when nothing succeeds."""
        self.recorder.swap()
        await self.pause(seconds)
        latencies, errors, _ = self.recorder.swap()
        self.check_not_all_failed(len(latencies), errors)

    def check_not_all_failed(self, successes: int, errors: int) -> None:
        """Raise LoadError when requests came back and every one was an error (a broken model or input)."""
        if errors and not successes:
            raise LoadError(f"every request failed: {self.recorder.first_error}")

    async def measure(self, window_s: float, max_windows: int, stable_windows: int, stability: float,
                      on_window: Callable[[Window], None]) -> StepResult:
        """Windows until `stable_windows` in a row agree on throughput within `stability`, or the cap."""
        result = StepResult(kept=max(1, min(stable_windows, MAX_KEPT_WINDOWS)))
        stats = await self.transport.statistics(self.model)
        self.recorder.swap()
        started, cpu_started = clock(), time.process_time()
        while result.measured < max_windows:
            await self.pause(window_s)
            latencies, errors, sent = self.recorder.swap()
            ended, cpu_ended = clock(), time.process_time()
            stats_after = await self.transport.statistics(self.model)
            window = Window(ended - started, latencies, errors, sent, cpu_ended - cpu_started,
                            stats, stats_after)
            if not result.measured:  # answers that came after a short warm-up get the same check
                self.check_not_all_failed(len(latencies), errors)
            result.add(window)
            on_window(window)
            started, cpu_started, stats = ended, cpu_ended, stats_after
            if is_stable(result.last(stable_windows), stable_windows, stability):
                result.stable = True
                break
        return result


def is_stable(windows: list[Window], needed: int, stability: float) -> bool:
    """Whether the last `needed` windows' throughputs all lie within `stability` of their mean."""
    if len(windows) < needed:
        return False
    rates = [w.throughput for w in windows]
    mean = sum(rates) / len(rates)
    return mean > 0 and (max(rates) - min(rates)) <= stability * mean


def interval_source(rate: float, distribution: str, seed: int) -> Callable[[], float]:
    """Seconds to the next send: fixed 1/rate, or exponential with mean 1/rate (a Poisson process)."""
    mean = 1.0 / rate
    if distribution == "constant":
        return lambda: mean
    rng = np.random.default_rng(seed)
    block: list[float] = []

    def next_interval() -> float:
        if not block:
            block.extend(rng.exponential(mean, size=4096).tolist())
        return block.pop()

    return next_interval


async def cancel_all(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the load tasks and wait for them to finish."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
