"""The load generator behind `ge-console bench`, the console's load panel and the notebooks.

`run_load(spec)` (async) or `run_load_sync(spec)` measure a sweep and return one BenchRow per step;
`LoadRun(spec).start()` does the same on a background thread with its own event loop, for UIs that
poll `latest()` and may `stop()` it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import threading
import time
from collections.abc import Callable

import numpy as np

from triton_ge_console.sessions.loadgen.engine import (
    LoadLoops,
    Recorder,
    StepResult,
    StopRequested,
    Window,
    cancel_all,
    interval_source,
)
from triton_ge_console.sessions.loadgen.inputs import (
    LoadSpecError,
    ModelSignature,
    RequestTensor,
    build_inputs,
)
from triton_ge_console.sessions.loadgen.transport import (
    LoadError,
    RequestOptions,
    StatsTotals,
    Transport,
    UnknownModelError,
    open_transport,
)
from triton_ge_console.sessions.loadgen.types import ROW_FIELDS, BenchRow, LoadSpec, Progress, RunContext

__all__ = ["ROW_FIELDS", "BenchRow", "LoadError", "LoadRun", "LoadSpec", "LoadSpecError", "Progress",
           "RunContext", "UnknownModelError", "run_load", "run_load_sync"]

ProgressCallback = Callable[[Progress], None]
ContextCallback = Callable[[RunContext], None]


async def run_load(spec: LoadSpec, progress: ProgressCallback | None = None,
                   stop: threading.Event | None = None, on_context: ContextCallback | None = None
                   ) -> list[BenchRow]:
    """Measure every step of the sweep; a set `stop` ends it early with the steps finished so far.

    `on_context` hears once, before the first step, what the run measures against (RunContext).
    Raises LoadSpecError (bad options, checked against the model), UnknownModelError, LoadError.
    """
    spec.validate()
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    transport = open_transport(spec.protocol, spec.url, spec.http_json_body, spec.headers)
    report = _Reporter(spec, progress)
    rows: list[BenchRow] = []
    try:
        report.emit(1, "connecting")
        signature = await transport.signature(spec.model)
        tensors = build_inputs(signature, spec.batch_size, spec.shapes, spec.input_files, spec.seed)
        transport.prepare(spec.model, tensors, tuple(o.name for o in signature.outputs),
                          RequestOptions(spec.priority, spec.timeout_us))
        if on_context is not None:
            on_context(await _context(spec, transport, signature, tensors, started_at))
        for step, level in enumerate(spec.levels, start=1):
            rows.append(await _run_step(spec, transport, level, step, report, stop))
        report.emit(len(spec.levels), "done")
    except StopRequested:
        report.emit(len(rows) + 1, "stopped")
    finally:
        await transport.close()
    return rows


async def _context(spec: LoadSpec, transport: Transport, signature: ModelSignature,
                   tensors: tuple[RequestTensor, ...], started_at: str) -> RunContext:
    """The run's RunContext: the inputs as built, the server's version, the config's digest."""
    return RunContext(
        model=spec.model, protocol=spec.protocol, url=spec.url, batch_size=spec.batch_size,
        started_at=started_at, input_shapes={t.name: tuple(int(d) for d in t.array.shape) for t in tensors},
        server_version=await transport.server_version(), config_digest=signature.config_digest,
    )


def run_load_sync(spec: LoadSpec, progress: ProgressCallback | None = None,
                  stop: threading.Event | None = None, on_context: ContextCallback | None = None
                  ) -> list[BenchRow]:
    """run_load to completion; inside a running loop (a notebook cell) on a worker thread's own loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_load(spec, progress, stop, on_context))
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="loadgen") as pool:
        return pool.submit(asyncio.run, run_load(spec, progress, stop, on_context)).result()


class _Reporter:
    """Builds Progress records for one run and hands them to the callback."""

    def __init__(self, spec: LoadSpec, callback: ProgressCallback | None) -> None:
        self.spec = spec
        self.callback = callback
        self.started = time.monotonic()
        self.completed = 0
        self.errors = 0
        self.windows = 0

    def emit(self, step: int, phase: str, window: Window | None = None, windows: int = 0,
             row: BenchRow | None = None) -> None:
        """Send one Progress to the callback, if any."""
        if self.callback is None:
            return
        levels = self.spec.levels
        self.callback(Progress(
            mode=self.spec.mode, level=levels[min(step, len(levels)) - 1], step=step, steps=len(levels),
            phase=phase, window=windows, max_windows=self.spec.max_windows,
            window_throughput_rps=window.throughput if window else None,
            window_p50_ms=_percentile_ms(window.latencies, 50) if window else None,
            completed=self.completed, errors=self.errors, elapsed_s=time.monotonic() - self.started, row=row,
        ))


async def _run_step(spec: LoadSpec, transport: Transport, level: float, step: int, report: _Reporter,
                    stop: threading.Event | None) -> BenchRow:
    """One concurrency level or rate: start the load, warm up, measure until stable, stop the load."""
    loops = LoadLoops(transport, spec.model, stop)
    if spec.mode == "rate":
        intervals = interval_source(level, spec.distribution, spec.seed + step)
        tasks = [asyncio.create_task(loops.open_loop(intervals, spec.max_inflight))]
    else:
        tasks = [asyncio.create_task(loops.closed_loop()) for _ in range(int(level))]
    report.completed = report.errors = report.windows = 0

    def on_window(window: Window) -> None:
        report.windows += 1
        report.completed += len(window.latencies)
        report.errors += window.errors
        report.emit(step, "measuring", window, report.windows)

    try:
        report.emit(step, "warmup")
        await loops.warm_up(spec.warmup_ms / 1000)
        result = await loops.measure(spec.window_ms / 1000, spec.max_windows, spec.stable_windows,
                                     spec.stability, on_window)
    finally:
        await loops.drain(tasks)
        await cancel_all(tasks)
        await loops.cancel_sends()
    row = summarize(spec, level, result, loops.recorder)
    report.emit(step, "step-done", None, result.measured, row)
    return row


def summarize(spec: LoadSpec, level: float, result: StepResult, recorder: Recorder) -> BenchRow:
    """A BenchRow from the step's last `stable_windows` windows (at most the kept ones), pooled; queue
    refusals are the whole step's, so a burst's every refused request is counted."""
    used = result.last(spec.stable_windows)
    latencies = np.fromiter((x for w in used for x in w.latencies), dtype=np.float64)
    wall = sum(w.duration_s for w in used)
    throughput = latencies.size / wall if wall > 0 else 0.0
    split = server_split(used[0].stats_before, used[-1].stats_after)
    rate_mode = spec.mode == "rate"
    return BenchRow(
        model=spec.model, protocol=spec.protocol, batch_size=spec.batch_size,
        concurrency=None if rate_mode else int(level), rate=level if rate_mode else None,
        throughput_rps=throughput, inferences_per_s=throughput * spec.batch_size,
        p50_ms=_percentile_ms(latencies, 50), p90_ms=_percentile_ms(latencies, 90),
        p95_ms=_percentile_ms(latencies, 95), p99_ms=_percentile_ms(latencies, 99),
        avg_ms=float(latencies.mean() * 1000) if latencies.size else None,
        max_ms=float(latencies.max() * 1000) if latencies.size else None,
        requests=int(latencies.size), errors=sum(w.errors for w in used), windows=result.measured,
        stable=result.stable, **split,
        client_cpu=sum(w.cpu_s for w in used) / wall if wall > 0 else None,
        send_rate_rps=sum(w.sent for w in used) / wall if rate_mode and wall > 0 else None,
        first_error=recorder.first_error, rejected=recorder.rejected, timed_out=recorder.timed_out,
    )


def _percentile_ms(latencies: list[float] | np.ndarray, q: float) -> float | None:
    """The q-th percentile in milliseconds, None without samples."""
    if len(latencies) == 0:
        return None
    return float(np.percentile(latencies, q) * 1000)


def server_split(before: StatsTotals | None, after: StatsTotals | None) -> dict[str, float | None]:
    """Triton's average per-request queue and compute times (ms) between two statistics readings."""
    keys = ("queue", "input", "infer", "output")
    names = ("server_queue_ms", "server_compute_input_ms", "server_compute_infer_ms",
             "server_compute_output_ms")
    split: dict[str, float | None] = dict.fromkeys((*names, "server_compute_ms"))
    if before is None or after is None:
        return split
    for key, name in zip(keys, names, strict=True):
        count = getattr(after, f"{key}_count") - getattr(before, f"{key}_count")
        nanos = getattr(after, f"{key}_ns") - getattr(before, f"{key}_ns")
        split[name] = nanos / count / 1e6 if count > 0 else None
    parts = [split[n] for n in names[1:]]
    split["server_compute_ms"] = sum(p for p in parts if p is not None) if any(
        p is not None for p in parts) else None
    return split


class LoadRun:
    """A run on its own thread and event loop: start(), poll latest()/rows(), stop(), wait()."""

    def __init__(self, spec: LoadSpec, progress: ProgressCallback | None = None) -> None:
        self.spec = spec
        self._callback = progress
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._latest: Progress | None = None
        self._rows: list[BenchRow] = []
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=f"loadgen-{spec.model}", daemon=True)

    def start(self) -> LoadRun:
        """Begin the run in the background; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask the run to end; it finishes within ~100 ms plus closing in-flight requests."""
        self._stop.set()

    def wait(self, timeout: float | None = None) -> list[BenchRow]:
        """Block until the run ends (or timeout); re-raises the run's error; returns the rows so far."""
        self._thread.join(timeout)
        if self._error is not None and not self._thread.is_alive():
            raise self._error
        return self.rows()

    @property
    def running(self) -> bool:
        """Whether the background thread is still working."""
        return self._thread.is_alive()

    @property
    def error(self) -> BaseException | None:
        """What ended the run, if it failed."""
        return self._error

    def latest(self) -> Progress | None:
        """The newest progress record."""
        with self._lock:
            return self._latest

    def rows(self) -> list[BenchRow]:
        """The steps finished so far."""
        with self._lock:
            return list(self._rows)

    def _record(self, progress: Progress) -> None:
        """Keep the newest progress and finished rows, then forward to the callback."""
        with self._lock:
            self._latest = progress
            if progress.row is not None:
                self._rows.append(progress.row)
        if self._callback is not None:
            self._callback(progress)

    def _main(self) -> None:
        """Thread body: its own event loop for the whole run."""
        try:
            asyncio.run(run_load(self.spec, self._record, self._stop))
        except BaseException as exc:  # handed to the UI through error / wait()
            self._error = exc
