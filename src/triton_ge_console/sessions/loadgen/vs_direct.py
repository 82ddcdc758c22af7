"""`ge-console bench MODEL --vs-direct`: what Triton costs this model, against its own executor in-process.

The served model's executor (the glue's: AscendCL on an NPU, ONNX Runtime with the served model's threads
and options in emulation) is opened here from the model's repository folder and the config the server
reports, and run directly; the same inputs go through the running Triton over each protocol. Paths are
interleaved in rounds (benchmarks/rounds.py's order), so a noisy host's drift hits each alike; every
figure is the median over rounds with its range, and "Triton adds" is taken within each round.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from triton_ge_console.backend_glue.executor import Executor
from triton_ge_console.sessions.loadgen.inputs import LoadSpecError, ModelSignature, build_inputs
from triton_ge_console.sessions.loadgen.pinning import Affinities, available_cpus, pin_this_thread, stub_pids
from triton_ge_console.sessions.loadgen.rounds import Spread, round_order
from triton_ge_console.sessions.loadgen.transport import (
    InferenceFailed,
    LoadError,
    Transport,
    open_transport,
)

DIRECT = "direct"
WARMUP_CALLS = 2


@dataclass(frozen=True)
class VsDirectSpec:
    """One comparison: a served model, where Triton answers (per protocol), where its files are."""

    model: str
    endpoints: Mapping[str, str]  # protocol → host:port, in the order they are reported
    repository: Path  # the served repository (the model's folder is repository / model)
    headers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # per protocol
    batches: tuple[int, ...] = (1, 4, 8)
    seq_len: int | None = None  # every dynamic non-batch dim (a sequence length); None: 1
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # --shape, wins over seq_len
    rounds: int = 3
    requests: int = 20  # timed requests per path, batch and round
    throughput_s: float = 1.5  # seconds per path and round at maximum throughput
    concurrency: int | None = None  # requests in flight through Triton; None: 2 × the model's instances
    pin: tuple[int, ...] = ()  # CPUs of the executor's own (direct and the served stub), else shared
    server_pid: int | None = None  # tritonserver's pid when known (finds the stub to pin)

    def validate(self) -> None:
        """Raise LoadSpecError naming the first option that cannot work."""
        if not self.endpoints:
            raise LoadSpecError("--vs-direct needs at least one protocol's address")
        if self.rounds < 1 or self.requests < 3 or self.throughput_s <= 0:
            raise LoadSpecError("--rounds must be >= 1 and --requests >= 3")
        if not self.batches or any(b < 1 for b in self.batches):
            raise LoadSpecError("--batch: every batch size must be at least 1")
        if self.seq_len is not None and self.seq_len < 1:
            raise LoadSpecError(f"--seq-len {self.seq_len}: must be at least 1")


@dataclass(frozen=True)
class LatencyRow:
    """One batch size over one protocol: p50 and p99 each way, and what Triton adds to the p50."""

    batch: int
    protocol: str
    direct_p50_ms: Spread
    direct_p99_ms: Spread
    triton_p50_ms: Spread
    triton_p99_ms: Spread
    added_p50_ms: Spread  # Triton p50 − direct p50, within each round


@dataclass(frozen=True)
class ThroughputRow:
    """Maximum throughput at one batch size, each way, and through Triton ÷ direct (within each round)."""

    batch: int
    protocol: str
    direct_rps: Spread
    triton_rps: Spread
    ratio: Spread


@dataclass(frozen=True)
class VsDirectReport:
    """The whole comparison: the seed's table as data."""

    model: str
    executor: str  # "npu" | "cpu-emulated"
    instances: int
    concurrency: int  # requests in flight through Triton at maximum throughput
    input_shapes: Mapping[str, tuple[int, ...]]  # at batch 1 (the batch dim included where it batches)
    rounds: int
    cpus: int
    pinned: tuple[int, ...]  # the executor's own CPUs; () when it shares them with client and server
    notes: tuple[str, ...]
    latency: tuple[LatencyRow, ...]
    throughput: tuple[ThroughputRow, ...]
    # the served model's dynamic batching delay (µs), which a lone request through Triton waits for others
    # in its latency above direct; None without dynamic batching
    queue_delay_us: int | None = None


Feeds = dict[str, np.ndarray]
Sample = dict[str, list[float]]  # path → one figure per round


def host_note(executor_kind: str, cpus: set[int], pinned: tuple[int, ...], stubs: int) -> tuple[str, ...]:
    """What the figures mean on this host (`cpus`: the CPUs it offers): shared CPUs, or which CPUs each side
    ran on."""
    if executor_kind == "npu":
        return ()
    if not pinned:
        return (f"CPU emulation: the client, tritonserver and the model share this host's {len(cpus)} CPUs, "
                "so through Triton the transfer competes with the model for them (on an NPU the model runs "
                "beside them); --pin-executor CPUS gives the executor CPUs of its own",)
    rest = ",".join(str(c) for c in sorted(cpus - set(pinned)))
    return (f"the executor ran on CPU {','.join(map(str, pinned))} (in-process, and the served model's "
            f"{stubs} stub process{'es' if stubs != 1 else ''}); the client and tritonserver on CPU {rest}",)


def queue_delay_us(config: Mapping[str, Any]) -> int | None:
    """The dynamic batching delay of a served config (Triton's JSON gives its uint64 as a string), None
    when the model does not batch dynamically."""
    batching = config.get("dynamic_batching")
    if not isinstance(batching, Mapping):
        return None
    return int(batching.get("max_queue_delay_microseconds", 0) or 0)


def latest_version(model_dir: Path) -> Path:
    """The model's highest numbered version folder (Triton's default version policy serves it)."""
    folders = model_dir.iterdir() if model_dir.is_dir() else iter(())
    versions = [p for p in folders if p.is_dir() and p.name.isdigit()]
    if not versions:
        raise LoadError(f"{model_dir}: no version folder; is --repository the served repository?")
    return max(versions, key=lambda p: int(p.name))


def open_direct(repository: Path, model: str, config: dict[str, Any], instance: int = 0) -> Executor:
    """The glue's own executor for the served model, with its settings (mode, device, threads, options)."""
    from triton_ge_console.backend_glue.loading import open_executor
    from triton_ge_console.backend_glue.settings import GlueConfigError, load_settings

    backend = str(config.get("backend", ""))
    if backend not in ("ge", "npu_ge"):
        raise LoadSpecError(f"--vs-direct: model {model!r} is served by backend {backend or '?'!r}; only the "
                            "ge and npu_ge backends have an executor to run directly")
    version = latest_version(repository / model)
    args = {"model_repository": str(repository / model), "model_version": version.name,
            "model_name": model, "model_instance_name": f"{model}_{instance}",
            "model_instance_device_id": "0"}
    try:
        return open_executor(load_settings(args, config), config)
    except (GlueConfigError, RuntimeError) as exc:
        raise LoadError(f"--vs-direct: cannot open model {model!r}'s executor: {exc}") from exc


def executor_feeds(executor: Executor, tensors: Mapping[str, np.ndarray], batched: bool) -> Feeds:
    """The arrays as the glue hands them to its executor: a model scalar served as dims [1] squeezed."""
    from triton_ge_console.backend_glue.loading import squeezed

    scalars = {i.name for i in executor.inputs if squeezed(i, batched)}
    return {name: array.reshape(()) if name in scalars and array.shape == (1,) else array
            for name, array in tensors.items()}


def shapes_for(signature: ModelSignature, seq_len: int | None,
               given: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Each input's dims without the batch dim: --shape as given, else every dynamic dim at seq_len."""
    shapes = dict(given)
    if seq_len is None:
        return shapes
    skip = 1 if signature.max_batch_size > 0 else 0
    for tensor in signature.inputs:
        if tensor.name not in shapes:
            shapes[tensor.name] = tuple(seq_len if d == -1 else d for d in tensor.shape[skip:])
    return shapes


def _percentiles(times: list[float]) -> tuple[float, float]:
    """p50 and p99 in ms of some durations in seconds."""
    values = np.asarray(times) * 1000.0
    return float(np.percentile(values, 50)), float(np.percentile(values, 99))


def _timed_runs(executor: Executor, feeds: Feeds, count: int) -> list[float]:
    """Seconds of each of count direct runs, after warm-up runs."""
    for _ in range(WARMUP_CALLS):
        executor.run(feeds)
    times = []
    for _ in range(count):
        started = time.perf_counter()
        executor.run(feeds)
        times.append(time.perf_counter() - started)
    return times


def _runs_until(executor: Executor, feeds: Feeds, deadline: float) -> int:
    """Direct runs completed before the deadline (one stream)."""
    done = 0
    while time.perf_counter() < deadline:
        executor.run(feeds)
        done += 1
    return done


class _DirectPool:
    """The executors (one per served instance), each on its own thread, pinned when asked."""

    def __init__(self, open_one: Callable[[int], Executor], instances: int, pin: tuple[int, ...]) -> None:
        self._pin = pin
        self._pool = concurrent.futures.ThreadPoolExecutor(instances, thread_name_prefix="direct",
                                                           initializer=self._setup)
        self._local = threading.local()
        # every thread opens its own executor (ORT's pool threads then inherit the thread's affinity)
        barrier = threading.Barrier(instances)
        self.executors = list(self._pool.map(lambda i: self._open(open_one, i, barrier), range(instances)))

    def _setup(self) -> None:
        """A new worker thread: on the executor's CPUs when pinned."""
        if self._pin:
            pin_this_thread(self._pin)

    def _open(self, open_one: Callable[[int], Executor], index: int, barrier: threading.Barrier) -> Executor:
        """Open executor `index` on this thread (the barrier puts each on its own worker)."""
        barrier.wait(timeout=120)
        executor = open_one(index)
        self._local.executor = executor
        return executor

    def run(self, call: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        """Run call(executor-of-this-thread, *args) on a worker."""
        return self._pool.submit(lambda: call(self._local.executor, *args))

    def close(self) -> None:
        """Stop the workers, then close every executor."""
        self._pool.shutdown(wait=True)
        for executor in self.executors:
            with contextlib.suppress(Exception):
                executor.close()


async def _triton_latencies(transport: Transport, count: int) -> list[float]:
    """Seconds of each of count requests sent one at a time, after warm-up requests."""
    for _ in range(WARMUP_CALLS):
        await transport.infer()
    times = []
    for _ in range(count):
        started = time.perf_counter()
        await transport.infer()
        times.append(time.perf_counter() - started)
    return times


async def _triton_throughput(transport: Transport, in_flight: int, seconds: float) -> float:
    """Requests per second with `in_flight` requests kept in flight for `seconds` (closed loop)."""
    done: list[float] = []
    errors: list[str] = []
    deadline = time.perf_counter() + seconds
    loops = [asyncio.ensure_future(transport.closed_loop(done.append, errors.append,
                                                         lambda: time.perf_counter() < deadline))
             for _ in range(in_flight)]
    started = time.perf_counter()
    await asyncio.wait(loops, timeout=seconds + 30)
    elapsed = time.perf_counter() - started
    for loop in loops:
        loop.cancel()
    await asyncio.gather(*loops, return_exceptions=True)
    if errors:
        raise InferenceFailed(errors[0])
    return len(done) / elapsed


def _direct_throughput(pool: _DirectPool, feeds: Feeds, seconds: float) -> float:
    """Runs per second of every executor looping at once (as many streams as served instances)."""
    started = time.perf_counter()
    deadline = started + seconds
    futures = [pool.run(_runs_until, feeds, deadline) for _ in pool.executors]
    done = sum(f.result() for f in futures)
    return done / (time.perf_counter() - started)


@contextlib.contextmanager
def _host_off_the_executor(spec: VsDirectSpec, cpus: set[int]) -> Iterator[Affinities | None]:
    """With --pin-executor: this process and tritonserver on the CPUs the executor leaves, before the
    executor's threads start (they pin themselves, and ONNX Runtime's threads they start, to its CPUs);
    every affinity put back on exit. None (nothing changed) without it."""
    if not spec.pin:
        yield None
        return
    rest = cpus - set(spec.pin)
    with Affinities() as affinities:
        affinities.pin_process(os.getpid(), rest)
        if spec.server_pid:
            affinities.pin_process(spec.server_pid, rest)
        yield affinities


def _pin_stubs(affinities: Affinities | None, spec: VsDirectSpec, executor_kind: str) -> int:
    """The served model's stubs on the executor's CPUs (CPU emulation: the model computes there); how many."""
    if affinities is None or executor_kind == "npu":
        return 0
    stubs = stub_pids(spec.model, spec.server_pid)
    for pid in stubs:
        affinities.pin_process(pid, spec.pin)
    return len(stubs)


async def measure_vs_direct(spec: VsDirectSpec, progress: Callable[[str], None] | None = None
                            ) -> VsDirectReport:
    """Latency at each batch and maximum throughput, direct and through Triton over each protocol."""
    spec.validate()
    say = progress or (lambda _text: None)
    transports = {p: open_transport(p, url, headers=spec.headers.get(p)) for p, url in spec.endpoints.items()}
    pool: _DirectPool | None = None
    try:
        signature = await next(iter(transports.values())).signature(spec.model)
        config = dict(signature.config)
        from triton_ge_console.backend_glue.settings import instance_count

        instances = instance_count(config)
        batched = signature.max_batch_size > 0
        batches = _batches(spec.batches, signature.max_batch_size)
        shapes = shapes_for(signature, spec.seq_len, spec.shapes)
        inputs = {b: build_inputs(signature, b, shapes, seed=0) for b in batches}
        outputs = tuple(o.name for o in signature.outputs)
        in_flight = spec.concurrency or 2 * instances
        cpus = available_cpus() if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
        with _host_off_the_executor(spec, cpus) as affinities:
            say(f"opening {instances} executor(s) for {spec.model} in-process")
            pool = await asyncio.to_thread(
                _DirectPool, lambda i: open_direct(spec.repository, spec.model, config, i), instances,
                spec.pin)
            kind = pool.executors[0].kind
            stubs = _pin_stubs(affinities, spec, kind)
            feeds = {b: executor_feeds(pool.executors[0], {t.name: t.array for t in inputs[b]}, batched)
                     for b in batches}
            latency, throughput = await _rounds(spec, transports, pool, inputs, feeds, outputs, in_flight,
                                                say)
        return VsDirectReport(
            model=spec.model, executor=kind, instances=instances, concurrency=in_flight,
            input_shapes={t.name: tuple(int(d) for d in t.array.shape) for t in inputs[batches[0]]},
            rounds=spec.rounds, cpus=len(cpus), pinned=spec.pin,
            notes=host_note(kind, cpus, spec.pin, stubs), latency=latency, throughput=throughput,
            queue_delay_us=queue_delay_us(config))
    except InferenceFailed as exc:
        raise LoadError(f"a request to {spec.model} failed: {exc}") from None
    finally:
        if pool is not None:
            pool.close()
        for transport in transports.values():
            await transport.close()


def measure_vs_direct_sync(spec: VsDirectSpec, progress: Callable[[str], None] | None = None
                           ) -> VsDirectReport:
    """measure_vs_direct to completion; inside a running loop (a notebook cell) on a worker's own loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(measure_vs_direct(spec, progress))
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="vs-direct") as pool:
        return pool.submit(asyncio.run, measure_vs_direct(spec, progress)).result()


def _batches(asked: tuple[int, ...], max_batch_size: int) -> tuple[int, ...]:
    """The batch sizes to measure: as asked, refusing those the model cannot take (1 without batching)."""
    if max_batch_size == 0:
        if asked != (1,) and asked != (1, 4, 8):
            raise LoadSpecError(f"--batch {','.join(map(str, asked))}: the model does not batch "
                                "(max_batch_size 0)")
        return (1,)
    too_big = [b for b in asked if b > max_batch_size]
    if too_big:
        raise LoadSpecError(f"--batch {too_big[0]}: above the model's max_batch_size {max_batch_size}")
    return asked


async def _rounds(spec: VsDirectSpec, transports: Mapping[str, Transport], pool: _DirectPool,
                  inputs: Mapping[int, Any], feeds: Mapping[int, Feeds], outputs: tuple[str, ...],
                  in_flight: int, say: Callable[[str], None]
                  ) -> tuple[tuple[LatencyRow, ...], tuple[ThroughputRow, ...]]:
    """Every round: each batch's latency, then the first batch's maximum throughput, paths interleaved."""
    paths = [DIRECT, *transports]
    p50: dict[int, Sample] = {b: {p: [] for p in paths} for b in feeds}
    p99: dict[int, Sample] = {b: {p: [] for p in paths} for b in feeds}
    rate: Sample = {p: [] for p in paths}
    top = next(iter(feeds))
    for index in range(spec.rounds):
        order = round_order(paths, index)
        for batch in feeds:
            for path in order:
                if path == DIRECT:
                    times = await asyncio.wrap_future(pool.run(_timed_runs, feeds[batch], spec.requests))
                else:
                    transports[path].prepare(spec.model, inputs[batch], outputs)
                    times = await _triton_latencies(transports[path], spec.requests)
                low, high = _percentiles(times)
                p50[batch][path].append(low)
                p99[batch][path].append(high)
        for path in order:
            if path == DIRECT:
                rate[path].append(await asyncio.to_thread(_direct_throughput, pool, feeds[top],
                                                          spec.throughput_s))
            else:
                transports[path].prepare(spec.model, inputs[top], outputs)
                rate[path].append(await _triton_throughput(transports[path], in_flight, spec.throughput_s))
        say(f"round {index + 1}/{spec.rounds}: " + ", ".join(f"{p} {rate[p][-1]:.1f}/s" for p in paths))
    latency = tuple(
        LatencyRow(batch, protocol, Spread.of(p50[batch][DIRECT]), Spread.of(p99[batch][DIRECT]),
                   Spread.of(p50[batch][protocol]), Spread.of(p99[batch][protocol]),
                   Spread.of([t - d for t, d in zip(p50[batch][protocol], p50[batch][DIRECT], strict=True)]))
        for batch in feeds for protocol in transports)
    throughput = tuple(
        ThroughputRow(top, protocol, Spread.of(rate[DIRECT]), Spread.of(rate[protocol]),
                      Spread.of([t / d for t, d in zip(rate[protocol], rate[DIRECT], strict=True) if d > 0]
                                or [0.0]))
        for protocol in transports)
    return latency, throughput
