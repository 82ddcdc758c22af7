"""`ge-console bench --generate`: stream generations at fixed prompt and output lengths, a concurrency sweep
(closed loop) or a request-rate sweep (open loop, constant or Poisson arrivals), over Triton's gRPC stream
or HTTP generate_stream, or an OpenAI-compatible API, and report token-level figures per step: TTFT, ITL,
end-to-end latency and the input and output sequence lengths (avg, min, max, std and percentiles p25 to
p99), output tokens/s, requests/s and goodput (requests/s meeting the SLO on TTFT and on ITL). TTFT, ITL
and goodput are genai-perf's: ITL is one figure per generation, (e2e - TTFT) / (tokens - 1), and its
statistics are over generations; the worst stream's own p99 of the intervals between its tokens is
reported beside them."""

from __future__ import annotations

import dataclasses
import json
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from triton_ge_console.errors import GeConsoleError
from triton_ge_console.sessions.loadgen.generate_client import (
    Generation,
    GrpcStreamer,
    HttpStreamer,
    StreamResult,
    http_generate,
    openai_generate,
)
from triton_ge_console.sessions.loadgen.generate_stats import distribution
from triton_ge_console.triton_terms import host_and_port

MS_PER_S = 1000.0
Streamer = GrpcStreamer | HttpStreamer
Watch = Callable[[StreamResult], None]  # handed a generation as each of its tokens arrives (a live view)
DEFAULT_REQUESTS = 100  # generations a step measures by default: enough for its p99 to rest on a sample


class SloError(GeConsoleError, ValueError):
    """An --slo text that does not read as ttft=MS,itl=MS."""


@dataclass(frozen=True)
class Slo:
    """Service-level objectives in milliseconds; None: not judged."""

    ttft_ms: float | None = None
    itl_ms: float | None = None

    def met(self, result: StreamResult) -> bool:
        """Whether one generation met every objective given (its TTFT, and its ITL)."""
        if result.error is not None or result.ttft is None:
            return False
        if self.ttft_ms is not None and result.ttft * MS_PER_S > self.ttft_ms:
            return False
        itl = result.itl
        return self.itl_ms is None or itl is None or itl * MS_PER_S <= self.itl_ms


def parse_slo(text: str | None) -> Slo:
    """`ttft=200,itl=20` (milliseconds) → Slo; a bad part is named."""
    if not text:
        return Slo()
    values: dict[str, float] = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        key = key.strip().lower()
        if key not in ("ttft", "itl"):
            raise SloError(f"--slo {text!r}: {part!r}: expected ttft=MS or itl=MS")
        try:
            values[f"{key}_ms"] = float(value)
        except ValueError:
            raise SloError(f"--slo {text!r}: {part!r}: {value!r} is not a number of milliseconds") from None
        if values[f"{key}_ms"] <= 0:
            raise SloError(f"--slo {text!r}: {part!r}: must be more than 0 ms")
    return Slo(**values)


@dataclass(frozen=True)
class GenerateLoad:
    """One sweep: where, what, how much."""

    model: str
    host: str
    port: int
    protocol: str  # grpc | http (Triton's endpoints); with endpoint openai, the API's HTTP
    prompt_tokens: tuple[int, int]  # (low, high): each generation's length drawn uniformly, fixed if equal
    output_tokens: tuple[int, int]
    concurrency: tuple[int, ...]
    requests: int | None = None  # per step; None: 4 per stream, at least 8
    slo: Slo = field(default_factory=Slo)
    vocab: int = 32000
    headers: tuple[tuple[str, str], ...] = ()
    rates: tuple[float, ...] = ()  # requests per second, one step each (instead of concurrency)
    distribution: str = "constant"  # rate steps' inter-arrival times: constant | poisson
    endpoint: str = "triton"  # triton (gRPC stream / generate_stream) | openai (/v1/completions)
    base_path: str = ""  # the OpenAI API's path prefix (/v1)

    def requests_at(self, concurrency: int) -> int:
        """How many generations a step measures (a rate step: `concurrency` is its rate, rounded up)."""
        return self.requests if self.requests is not None else max(DEFAULT_REQUESTS, 4 * concurrency)

    def generate(self, generation: Generation, streamer: Streamer) -> StreamResult:
        """One generation over the load's endpoint, on the stream (gRPC) or kept connection (HTTP) given."""
        headers = dict(self.headers)
        if isinstance(streamer, GrpcStreamer):
            return streamer.generate(generation)
        if self.endpoint == "openai":
            return openai_generate(self.host, self.port, self.base_path, self.model, generation,
                                   headers=headers, kept=streamer)
        return http_generate(self.host, self.port, self.model, generation, headers=headers, kept=streamer)

    def open_streamer(self, watch: Watch | None = None) -> Streamer:
        """What one stream of generations goes over: a gRPC stream (`watch` handed each generation as its
        tokens arrive), or a kept-alive HTTP connection."""
        if self.endpoint == "triton" and self.protocol == "grpc":
            return GrpcStreamer(f"{self.host}:{self.port}", self.model, headers=dict(self.headers),
                                on_token=watch)
        return HttpStreamer(self.host, self.port)


@dataclass(frozen=True)
class GenerateRow:
    """One step's figures (milliseconds, per second); None where nothing was measured."""

    concurrency: int
    requests: int
    errors: int
    first_error: str | None
    duration_s: float
    output_tokens: int
    output_tokens_per_s: float | None
    requests_per_s: float | None
    goodput_per_s: float | None
    goodput_share: float | None
    ttft_ms: dict[str, float | None]
    itl_ms: dict[str, float | None]
    e2e_ms: dict[str, float | None]
    itl_p99_worst_stream_ms: float | None  # the highest of each generation's own ITL p99
    input_tokens: dict[str, float | None]  # input sequence length (the prompt's tokens)
    output_tokens_each: dict[str, float | None]  # output sequence length
    rate: float | None = None  # a rate step's requests per second (its concurrency: the most in flight)
    offered_per_s: float | None = None  # a rate step's arrivals as drawn: sent ÷ the schedule's span


def summarize(concurrency: int, results: list[StreamResult], duration_s: float, slo: Slo) -> GenerateRow:
    """A step's row from its generations."""
    done = [r for r in results if r.error is None]
    failed = [r for r in results if r.error is not None]
    tokens = sum(r.output_tokens for r in done)
    per_s = (lambda count: count / duration_s) if duration_s > 0 else (lambda count: None)
    judged = slo.ttft_ms is not None or slo.itl_ms is not None
    good = sum(slo.met(r) for r in done)
    worst = [float(np.percentile(r.itls, 99)) * MS_PER_S for r in done if r.itls]
    return GenerateRow(
        concurrency=concurrency, requests=len(done), errors=len(failed),
        first_error=failed[0].error if failed else None, duration_s=duration_s, output_tokens=tokens,
        output_tokens_per_s=per_s(tokens), requests_per_s=per_s(len(done)),
        goodput_per_s=per_s(good) if judged else None,
        goodput_share=(good / len(results) if results else None) if judged else None,
        ttft_ms=distribution([r.ttft for r in done if r.ttft is not None], MS_PER_S),
        itl_ms=distribution([r.itl for r in done if r.itl is not None], MS_PER_S),
        e2e_ms=distribution([r.e2e for r in done if r.e2e is not None], MS_PER_S),
        itl_p99_worst_stream_ms=max(worst) if worst else None,
        input_tokens=distribution([float(r.prompt_tokens) for r in done]),
        output_tokens_each=distribution([float(r.output_tokens) for r in done]),
    )


def _generation(load: GenerateLoad, index: int) -> Generation:
    """The index-th generation: its lengths and prompt ids from a generator seeded by the index (the same
    every run)."""
    rng = np.random.default_rng(index)
    length = int(rng.integers(load.prompt_tokens[0], load.prompt_tokens[1] + 1))
    output = int(rng.integers(load.output_tokens[0], load.output_tokens[1] + 1))
    return Generation(tuple(int(t) for t in rng.integers(0, load.vocab, length)), output)


def _worker(load: GenerateLoad, take: Callable[[], int | None], results: list[StreamResult],
            stop: threading.Event, watch: Watch | None = None) -> None:
    """One stream: generations one after another until the step has sent all it measures; a stream
    that cannot be opened or fails counts as a failed generation, never a lost thread."""
    streamer: Streamer | None = None
    try:
        streamer = load.open_streamer(watch)
        while not stop.is_set() and (index := take()) is not None:
            results.append(load.generate(_generation(load, index), streamer))
    except Exception as exc:  # tritonclient's and grpc's own error types: reported, not raised
        results.append(StreamResult(time.perf_counter(), error=f"{type(exc).__name__}: {exc}"))
    finally:
        if streamer is not None:
            streamer.close(cancel=True)


class _Tickets:
    """Hands out the indices of a phase's generations, `count` of them, to its streams."""

    def __init__(self, count: int, first: int) -> None:
        self._lock = threading.Lock()
        self._next, self._end = first, first + count

    def take(self) -> int | None:
        """The next generation's index, None when all are handed out."""
        with self._lock:
            if self._next >= self._end:
                return None
            self._next += 1
            return self._next - 1


def _phase(load: GenerateLoad, concurrency: int, tickets: _Tickets, stop: threading.Event,
           results: list[StreamResult] | None = None,
           watch: Watch | None = None) -> tuple[list[StreamResult], float]:
    """`concurrency` streams working through the tickets; their results (into `results` if given, so
    a watcher sees them arrive) and the wall time; the first stream's tokens to `watch` as they arrive."""
    results = [] if results is None else results
    started = time.perf_counter()
    threads = [threading.Thread(target=_worker, args=(load, tickets.take, results, stop,
                                                      watch if index == 0 else None), daemon=True)
               for index in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, time.perf_counter() - started


Measured = tuple[GenerateRow, list[StreamResult]]  # a step's row and the generations behind it


def run_step(load: GenerateLoad, concurrency: int, stop: threading.Event,
             measuring: Callable[[list[StreamResult], float], None] | None = None,
             watch: Watch | None = None) -> GenerateRow:
    """One concurrency step's row (see measure_step)."""
    return measure_step(load, concurrency, stop, measuring, watch)[0]


def measure_step(load: GenerateLoad, concurrency: int, stop: threading.Event,
                 measuring: Callable[[list[StreamResult], float], None] | None = None,
                 watch: Watch | None = None) -> Measured:
    """One concurrency step: a warm-up generation per stream (not measured), then the measured ones;
    `measuring` is handed the measured results' list and start time as they begin, `watch` one stream's
    generations (over gRPC) as their tokens arrive."""
    _phase(load, concurrency, _Tickets(concurrency, 0), stop, watch=watch)
    results: list[StreamResult] = []
    if measuring is not None:
        measuring(results, time.perf_counter())
    _, duration = _phase(load, concurrency, _Tickets(load.requests_at(concurrency), 10_000), stop, results,
                         watch)
    return summarize(concurrency, results, duration, load.slo), results


UNBOUNDED = 1_000_000  # generations a timed run may send: its duration ends it first


def timed_load(model: str, url: str, concurrency: int, protocol: str = "grpc",
               headers: Mapping[str, str] | None = None, prompt_tokens: int = 16,
               output_tokens: int = 32) -> GenerateLoad:
    """The load of a timed run (the load panels'): fixed lengths, one step, bounded by time alone."""
    host, port = host_and_port(url)
    return GenerateLoad(model=model, host=host, port=port, protocol=protocol,
                        prompt_tokens=(prompt_tokens, prompt_tokens),
                        output_tokens=(output_tokens, output_tokens), concurrency=(concurrency,),
                        requests=UNBOUNDED, headers=tuple((headers or {}).items()))


def run_timed(load: GenerateLoad, duration_s: float, stop: threading.Event,
              progress: Callable[[GenerateRow], None] | None = None, every_s: float = 1.0,
              watch: Watch | None = None) -> GenerateRow:
    """`load`'s first concurrency as streams for `duration_s` (or until `stop` is set, which the duration
    also sets); the figures so far every `every_s` while it measures, to `progress`; one stream's
    generations to `watch` as their tokens arrive."""
    concurrency = load.concurrency[0]
    measured: list[tuple[list[StreamResult], float]] = []
    finished = threading.Event()

    def report() -> None:
        while not finished.wait(every_s):
            if measured and progress is not None:
                results, started = measured[0]
                progress(summarize(concurrency, list(results), time.perf_counter() - started, load.slo))

    timer = threading.Timer(duration_s, stop.set)
    reporter = threading.Thread(target=report, daemon=True)
    timer.start()
    reporter.start()
    try:
        return run_step(load, concurrency, stop, lambda results, started: measured.append((results, started)),
                        watch)
    finally:
        timer.cancel()
        finished.set()
        reporter.join()


class _OpenLoop:
    """One rate step's generations, each on its own thread as it arrives, over pooled streams."""

    def __init__(self, load: GenerateLoad) -> None:
        self.load = load
        self.results: list[StreamResult] = []
        self._pool: queue.SimpleQueue[Streamer] = queue.SimpleQueue()
        self._opened: list[Streamer] = []
        self._lock = threading.Lock()
        self.in_flight = self.peak = 0

    def one(self, index: int) -> None:
        """One generation (a failure recorded as its result)."""
        load = self.load
        with self._lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        generation = _generation(load, index)
        try:
            streamer = self._streamer()
            self.results.append(load.generate(generation, streamer))
            self._pool.put(streamer)
        except Exception as exc:  # tritonclient's and grpc's own error types: reported, not raised
            self.results.append(StreamResult(time.perf_counter(), error=f"{type(exc).__name__}: {exc}"))
        finally:
            with self._lock:
                self.in_flight -= 1

    def _streamer(self) -> Streamer:
        """A free stream, or a new one."""
        try:
            return self._pool.get_nowait()
        except queue.Empty:
            streamer = self.load.open_streamer()
            with self._lock:
                self._opened.append(streamer)
            return streamer

    def close(self) -> None:
        """Close every stream opened."""
        for streamer in self._opened:
            streamer.close(cancel=True)


def measure_rate_step(load: GenerateLoad, rate: float, stop: threading.Event) -> Measured:
    """One rate step: a warm-up generation, then arrivals at `rate` per second (constant gaps or
    exponential ones), however many are in flight."""
    loop = _OpenLoop(load)
    loop.one(0)
    loop.results.clear()
    gaps = np.random.default_rng(7)
    threads: list[threading.Thread] = []
    started = due = time.perf_counter()
    for index in range(load.requests_at(int(np.ceil(rate)))):
        if stop.wait(max(0.0, due - time.perf_counter())):
            break
        threads.append(threading.Thread(target=loop.one, args=(10_000 + index,), daemon=True))
        threads[-1].start()
        due += gaps.exponential(1 / rate) if load.distribution == "poisson" else 1 / rate
    for thread in threads:
        thread.join()
    duration = time.perf_counter() - started
    loop.close()
    row = summarize(loop.peak, loop.results, duration, load.slo)
    offered = len(threads) / (due - started) if threads and due > started else None
    return dataclasses.replace(row, rate=rate, offered_per_s=offered), loop.results


def run_generate_load(load: GenerateLoad, stop: threading.Event,
                      on_row: Callable[[GenerateRow], None] | None = None,
                      on_results: Callable[[GenerateRow, list[StreamResult]], None] | None = None,
                      ) -> list[GenerateRow]:
    """Every step of the sweep (its rates, else its concurrencies), in order, until done or stopped;
    `on_results` hears each step's generations (the per-request export)."""
    rows: list[GenerateRow] = []
    steps: list[tuple[Callable[..., Measured], float]] = (
        [(measure_rate_step, rate) for rate in load.rates] if load.rates
        else [(measure_step, concurrency) for concurrency in load.concurrency])
    for run, level in steps:
        if stop.is_set():
            break
        row, results = run(load, level, stop)
        rows.append(row)
        if on_results is not None:
            on_results(row, results)
        if on_row is not None:
            on_row(row)
    return rows


COMPARED = {  # figure → how a row holds it
    "output_tokens_per_s": ("output_tokens_per_s", None),
    "ttft_p50_ms": ("ttft_ms", "p50"),
    "itl_p50_ms": ("itl_ms", "p50"),
    "e2e_p99_ms": ("e2e_ms", "p99"),
}


class BaselineError(GeConsoleError, ValueError):
    """A --compare file that is not an earlier `bench --generate --json`."""


StepKey = tuple[str, float]


def step_key(row: dict[str, Any]) -> StepKey:
    """What makes two runs' steps the same step: its rate, else its concurrency."""
    rate = row.get("rate")
    return ("rate", float(rate)) if rate is not None else ("concurrency", float(row["concurrency"]))


def read_baseline(text: str, where: str) -> dict[StepKey, dict[str, Any]]:
    """An earlier run's rows by step."""
    try:
        data = json.loads(text)
        kind = (data.get("context") or {}).get("kind", data.get("kind"))  # before the context: top-level
        rows = data["rows"] if kind == "generate" else None
    except (ValueError, AttributeError, KeyError, TypeError):
        rows = None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "concurrency" in r for r in rows):
        raise BaselineError(f"{where}: not the JSON of `ge-console bench --generate --json`")
    return {step_key(row): row for row in rows}


def _figure(row: dict[str, Any], figure: str) -> float | None:
    """One compared figure of a row (as JSON holds it)."""
    key, part = COMPARED[figure]
    value = row.get(key) if part is None else (row.get(key) or {}).get(part)
    return float(value) if isinstance(value, int | float) else None


def compare(rows: list[GenerateRow], baseline: dict[StepKey, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per step also in the baseline: each compared figure now ÷ then (None where either is missing)."""
    found = []
    for row in rows:
        now = asdict(row)
        then = baseline.get(step_key(now))
        if then is None:
            continue
        ratios: dict[str, Any] = {"concurrency": row.concurrency, "rate": row.rate}
        for figure in COMPARED:
            new, old = _figure(now, figure), _figure(then, figure)
            ratios[figure] = new / old if new is not None and old else None
        found.append(ratios)
    return found
