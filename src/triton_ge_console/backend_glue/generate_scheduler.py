"""Continuous batching for one generate model instance: sequences join at the next step, leave at once.

Each step: admit waiting requests while running sequences and reserved KV bytes stay within bounds;
prefill newcomers in chunks within the step's token budget (max_batched_tokens, vLLM's
max_num_batched_tokens, less one token per decoding sequence), the shortest remaining prompt first, so a
short newcomer never waits behind a long prompt's whole prefill and a prefill's memory is bounded by its
chunk (attention over chunk x context, not prompt x prompt); send each one's first token once its prompt
is in; then one decode step for every sequence of the batch together, whose caches stay one array per
past input from step to step. While the model runs, a thread asks the clients whether they left
(in Triton an IPC round trip per stream, which would otherwise hold the step); a sequence whose client
left before a step began ends at that step's end (or the next one's, when asking every stream takes
longer than a step, or when it left before its first token: that step asks nobody), its token unsent and
its KV cache freed. A sequence reserves its whole cache at
admission (prompt + max_tokens tokens), so a running sequence never runs out; one that could never fit is
refused when it arrives. No Triton here: a Stream is whatever answers the client (the Python backend's
response sender inside Triton, a list in tests).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from triton_ge_console.backend_glue.generate_batch import (
    Batch,
    KvLayout,
    TokenSampling,
    pick,
    prefill_feeds,
    presents,
)

Run = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
ENDINGS = ("length", "stop", "cancel", "error")
_GREEDY = np.random.default_rng(0)  # what greedy sequences hold: never drawn from


class Stream(Protocol):
    """One request's way back to its client."""

    def send(self, token: int, final: bool) -> bool:
        """Send one token (final: the last); False when the client is gone."""
        ...

    def fail(self, message: str) -> None:
        """End the stream with an error."""
        ...

    def cancelled(self) -> bool:
        """Whether the client cancelled or went away."""
        ...

    def close_cancelled(self) -> None:
        """End a stream its client cancelled."""
        ...


@dataclass(frozen=True)
class Lifetime:
    """When one sequence went through each phase (the scheduler's clock), for vLLM's request figures:
    queued from arrival to admission, prefilled to its first token, decoded to its last."""

    arrived: float
    admitted: float | None  # None: it ended while waiting
    first_token: float | None
    last_token: float | None
    prompt_tokens: int
    generated: int


class Events(Protocol):
    """Where the scheduler reports what happened (metrics)."""

    def first_token(self, seconds: float, prompt_tokens: int) -> None: ...
    def next_token(self, seconds: float) -> None: ...
    def ended(self, reason: str, lifetime: Lifetime) -> None: ...
    def occupancy(self, running: int, waiting: int, kv_bytes: int, kv_used: int) -> None: ...


class NoEvents:
    """Reports go nowhere (tests, or a Triton without custom metrics)."""

    def first_token(self, seconds: float, prompt_tokens: int) -> None:
        """Ignored."""

    def next_token(self, seconds: float) -> None:
        """Ignored."""

    def ended(self, reason: str, lifetime: Lifetime) -> None:
        """Ignored."""

    def occupancy(self, running: int, waiting: int, kv_bytes: int, kv_used: int) -> None:
        """Ignored."""


@dataclass(frozen=True)
class Limits:
    """The spec's generate bounds for one instance."""

    max_tokens: int = 128  # per request: the default and the most one may ask for
    eos_token_id: int | None = None
    max_running: int = 8
    max_waiting: int = 256
    kv_cache_bytes: int = 256 << 20
    max_batched_tokens: int = 256  # tokens one step runs: decodes (one each), then prefill chunks
    max_model_len: int | None = None  # prompt + max_tokens of one request (None: no bound)


@dataclass(frozen=True)
class GenerateRequest:
    """What a client asked for."""

    prompt: tuple[int, ...]
    max_tokens: int
    sampling: TokenSampling = field(default_factory=TokenSampling)


@dataclass
class Sequence:
    """One request being served."""

    stream: Stream
    request: GenerateRequest
    arrived: float
    reserved: int
    rng: np.random.Generator
    prefilled: int = 0  # prompt tokens already run
    prefill: list[np.ndarray] | None = None  # their keys and values, until the sequence joins the batch
    generated: int = 0
    last_token: int = 0
    last_time: float = 0.0
    admitted: float | None = None
    first_time: float | None = None
    ended: str | None = None
    tokens: list[int] = field(default_factory=list)


class CancelWatch:
    """Asks streams whether their clients left, on a thread of its own while the model runs: in Triton each
    question is an IPC round trip (50-190 us here), once per stream per step, which would otherwise hold
    the step. The step never waits for the answers: it takes those ready (a round begun at a step's start
    is ready at its end unless asking every stream takes longer than a step; then at the next step's end).
    Without a thread (tests stepping by hand) it asks when the answers are taken."""

    def __init__(self) -> None:
        self._ready = threading.Condition()
        self._asked: list[Stream] | None = None  # the round being asked (None: idle)
        self._answer: set[Stream] | None = None  # its answer, once every stream was asked
        self._thread: threading.Thread | None = None
        self._closing = False

    def start(self) -> None:
        """Answer on a thread of its own from now on."""
        self._thread = threading.Thread(target=self._loop, name="ge-generate-cancel", daemon=True)
        self._thread.start()

    def ask(self, streams: list[Stream]) -> None:
        """Begin a round over these streams, unless one is still under way (it covers a cancel made
        before this call)."""
        with self._ready:
            if self._asked is None:
                self._asked, self._answer = list(streams), None
                self._ready.notify_all()

    def left(self) -> set[Stream]:
        """The streams whose client left, from the last round if it is done (else nothing yet)."""
        with self._ready:
            if self._thread is None:
                asked, self._asked = self._asked or [], None
                return _cancelled(asked)
            if self._answer is None:
                return set()
            answer, self._asked, self._answer = self._answer, None, None
            return answer

    def _loop(self) -> None:
        """Answer each round as it comes."""
        while True:
            with self._ready:
                while (self._asked is None or self._answer is not None) and not self._closing:
                    self._ready.wait()
                if self._closing:
                    return
                asked = self._asked
            answer = _cancelled(asked or [])
            with self._ready:
                self._answer = answer

    def close(self) -> None:
        """Stop the thread."""
        with self._ready:
            self._closing = True
            self._ready.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)


def _cancelled(streams: list[Stream]) -> set[Stream]:
    """Those of these streams whose clients left."""
    return {stream for stream in streams if stream.cancelled()}


class Scheduler:
    """The waiting queue and the running batch of one instance, stepped by its own thread."""

    def __init__(self, run: Run, layout: KvLayout, limits: Limits, events: Events | None = None,
                 clock: Callable[[], float] = time.perf_counter, vocab: int | None = None,
                 idle: Callable[[], None] | None = None) -> None:
        self._run = run
        self._idle = idle  # called when the last sequence has left: the memory they used can go back
        self.layout = layout
        self.limits = limits
        self.vocab = vocab  # token ids run 0 to vocab - 1 (None: the model does not say)
        self._events: Events = events or NoEvents()
        self._clock = clock
        self._lock = threading.Condition()
        self._waiting: collections.deque[Sequence] = collections.deque()
        self.running: list[Sequence] = []
        self.batch = Batch.empty(layout)  # the decoding sequences' caches, a row each, in `rows` order
        self.rows: list[Sequence] = []
        self.reserved = 0  # KV bytes of the running sequences
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._watch = CancelWatch()
        self._stepping = threading.Lock()  # one thread steps at a time

    def problem(self, request: GenerateRequest) -> str | None:
        """Why a request can never be served here, or None."""
        limits = self.limits
        if not request.prompt:
            return "input_ids is empty: give at least one prompt token"
        outside = [t for t in request.prompt if t < 0 or (self.vocab is not None and t >= self.vocab)]
        if outside:  # an embedding Gather takes a negative id as counted from the end: never silently
            span = f"0 to {self.vocab - 1}" if self.vocab is not None else "0 or more"
            return f"input_ids: token id {outside[0]} is outside the vocabulary ({span})"
        if not 1 <= request.max_tokens <= limits.max_tokens:
            return (f"max_tokens {request.max_tokens}: expected 1 to {limits.max_tokens} "
                    "(the spec's generate.max_tokens)")
        context = len(request.prompt) + request.max_tokens
        if limits.max_model_len is not None and context > limits.max_model_len:
            return (f"{len(request.prompt)} prompt + {request.max_tokens} max_tokens = {context} tokens, "
                    f"more than the model's context of {limits.max_model_len} (generate.max_model_len)")
        need = self.reservation(request)
        if need > limits.kv_cache_bytes:
            return (f"needs {need} bytes of KV cache ({len(request.prompt)} prompt + {request.max_tokens} "
                    f"output tokens x {self.layout.bytes_per_token} bytes), more than the model's KV "
                    f"capacity of {limits.kv_cache_bytes} bytes (generate.kv_cache_mib): it can never fit")
        return None

    def kv_used(self) -> int:
        """KV bytes the running sequences' tokens take now (each reserves room for all it may hold)."""
        held = sum(s.prefilled + s.generated for s in self.running)
        return held * self.layout.bytes_per_token

    def reservation(self, request: GenerateRequest) -> int:
        """KV bytes a request holds while it runs: room for every token it may cache."""
        return (len(request.prompt) + request.max_tokens) * self.layout.bytes_per_token

    def submit(self, stream: Stream, request: GenerateRequest, wake: bool = True) -> str | None:
        """Queue a request (it joins at the next step it fits); the refusal, when it cannot be. wake=False
        leaves the stepping thread asleep: the caller steps first (step_first), then wakes it."""
        problem = self.problem(request)
        if problem is not None:
            return problem
        sampling = request.sampling  # greedy draws nothing: no generator of its own (74 us to seed one)
        rng = np.random.default_rng(sampling.seed) if sampling.temperature > 0 else _GREEDY
        sequence = Sequence(stream, request, self._clock(), self.reservation(request), rng)
        with self._lock:
            if self._stopping:
                return "the model is unloading"
            if len(self._waiting) >= self.limits.max_waiting:
                return (f"{len(self._waiting)} requests already wait (generate.max_waiting "
                        f"{self.limits.max_waiting}): try again later")
            self._waiting.append(sequence)
            if wake:
                self._lock.notify()
        return None

    def step(self, first: bool = False) -> bool:
        """One scheduling round; whether any sequence still runs or waits. first: a newcomer's first step on
        the caller's thread (step_first): prefills and first tokens only, no client asked, no decode."""
        self._admit()
        if not first:
            with self._lock:
                queued = [s.stream for s in self._waiting]
            self._watch.ask([s.stream for s in self.running] + queued)
        self._prefill_next(self.limits.max_batched_tokens - (0 if first else len(self.rows)))
        self._leave_ended()
        decoded = [] if first else list(self.rows)
        picked = self._decode(decoded) if decoded else []
        self._drop_cancelled(self._watch.left())
        for sequence, token in zip(decoded, picked, strict=False):
            if sequence.ended is None:
                self._emit(sequence, token)
        self._leave_ended()
        with self._lock:
            waiting = len(self._waiting)
        self._events.occupancy(len(self.running), waiting, self.reserved, self.kv_used())
        busy = bool(self.running) or waiting > 0
        if not busy and self._idle is not None:
            self._idle()
        return busy

    def _drop_cancelled(self, left: set[Stream]) -> None:
        """End the sequences, running or waiting, whose clients left (a waiting one gives up its place)."""
        if not left:
            return
        with self._lock:
            queued = [s for s in self._waiting if s.stream in left]
            for sequence in queued:
                self._waiting.remove(sequence)
        for sequence in [s for s in self.running if s.stream in left] + queued:
            sequence.stream.close_cancelled()
            self._end(sequence, "cancel")

    def _admit(self) -> None:
        """Waiting sequences that fit now, first come first served (a large one is not overtaken)."""
        with self._lock:
            while self._waiting and len(self.running) < self.limits.max_running:
                head = self._waiting[0]
                if self.reserved + head.reserved > self.limits.kv_cache_bytes:
                    break
                self._waiting.popleft()
                head.admitted = self._clock()
                self.running.append(head)
                self.reserved += head.reserved

    def _prefill_next(self, budget: int) -> None:
        """Prompt chunks within this step's token budget, the shortest remaining prompt first: a short
        newcomer's first token waits for one step, never for a long prompt's whole prefill (which goes on
        with what the budget leaves); each chunk is one run of its own sequence."""
        prefilling = [s for s in self.running if s.prefilled < len(s.request.prompt)]
        for sequence in sorted(prefilling, key=lambda s: len(s.request.prompt) - s.prefilled):
            if budget <= 0:
                return
            chunk = min(budget, len(sequence.request.prompt) - sequence.prefilled)
            self._prefill(sequence, chunk)
            budget -= chunk

    def _prefill(self, sequence: Sequence, chunk: int) -> None:
        """The prompt's next chunk in one run; after its last, the sequence joins the batch and its first
        token is sent at once."""
        prompt = sequence.request.prompt
        end = min(len(prompt), sequence.prefilled + chunk)
        feeds = prefill_feeds(self.layout, prompt[sequence.prefilled:end], sequence.prefill)
        self.batch.own(feeds)
        try:
            outputs = self._run(feeds)
        except Exception as exc:  # the executor's own failure types; the client hears why
            self._fail([sequence], f"prefill failed: {exc}")
            return
        sequence.prefill, sequence.prefilled = presents(self.layout, outputs, copy=True), end
        if end < len(prompt):
            return
        token = pick(outputs["logits"][0, -1], sequence.request.sampling, sequence.rng)
        cache, sequence.prefill = sequence.prefill, None
        self.batch.join(cache)
        self.rows.append(sequence)
        self._emit(sequence, token)

    def _decode(self, batch: list[Sequence]) -> list[int]:
        """One token for each sequence of the batch, in one run (sent once the step knows who left)."""
        try:
            feeds = self.batch.feeds([s.last_token for s in batch])
            outputs = self._run(feeds)
            self.batch.advance(feeds, outputs)
        except Exception as exc:  # the executor's own failure types; the clients hear why
            self._fail(batch, f"decode step failed: {exc}")
            return []
        logits = outputs["logits"]
        return [pick(logits[row, -1], s.request.sampling, s.rng) for row, s in enumerate(batch)]

    def _leave_ended(self) -> None:
        """Ended sequences leave the batch: their rows (their KV cache) freed."""
        gone = [row for row, s in enumerate(self.rows) if s.ended is not None]
        if gone:
            self.batch.leave(gone)
            self.rows = [s for s in self.rows if s.ended is None]

    def _emit(self, sequence: Sequence, token: int) -> None:
        """Stream one token; end the sequence on its stop token, its length, or a client gone."""
        now = self._clock()
        if sequence.generated == 0:
            sequence.first_time = now
            self._events.first_token(now - sequence.arrived, len(sequence.request.prompt))
        else:
            self._events.next_token(now - sequence.last_time)
        sequence.generated += 1
        sequence.last_token, sequence.last_time = token, now
        reason = None
        if self.limits.eos_token_id is not None and token == self.limits.eos_token_id:
            reason = "stop"
        elif sequence.generated >= sequence.request.max_tokens:
            reason = "length"
        if not sequence.stream.send(token, reason is not None):
            self._end(sequence, "cancel")
        elif reason is not None:
            self._end(sequence, reason)

    def _fail(self, batch: list[Sequence], message: str) -> None:
        """End these sequences with an error their clients receive."""
        for sequence in batch:
            sequence.stream.fail(message)
            self._end(sequence, "error")

    def _end(self, sequence: Sequence, reason: str) -> None:
        """The sequence leaves now: its cache and reservation are freed."""
        if sequence.ended is not None:
            return
        sequence.ended = reason
        sequence.prefill = None
        if sequence in self.running:
            self.running.remove(sequence)
            self.reserved -= sequence.reserved
        self._events.ended(reason, Lifetime(
            sequence.arrived, sequence.admitted, sequence.first_time,
            sequence.last_time if sequence.generated else None, len(sequence.request.prompt),
            sequence.generated))

    def start(self) -> None:
        """Step on a thread of its own whenever there is work."""
        self._watch.start()
        self._thread = threading.Thread(target=self._loop, name="ge-generate", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        """Sleep while idle, step while busy."""
        while True:
            with self._lock:
                while not self._waiting and not self.running and not self._stopping:
                    self._lock.wait()
                if self._stopping:
                    return
            with self._stepping:
                self.guarded_step()

    def step_first(self) -> None:
        """While no sequence runs, prefill the newcomers and send their first tokens on the caller's thread
        (execute's), then wake the stepping thread to decode on. Requests submitted with wake=False: a first
        token then waits for no thread's wake-up (0.5 ms traced on a loaded host) and shares the CPU with no
        other thread of the glue. No decode step here, so execute returns and Triton hands over the next
        request (a burst of streams joins sooner: 8 streams' tokens/s higher in 7 of 8 paired rounds); and
        no client is asked whether it left (an IPC on a second thread beside the prefill): one gone before
        its first token is seen at the next step's end."""
        try:
            if self.running or not self._stepping.acquire(blocking=False):
                return
            try:
                if not self.running and not self._stopping:
                    self.guarded_step(first=True)
            finally:
                self._stepping.release()
        finally:
            with self._lock:
                self._lock.notify()

    def guarded_step(self, first: bool = False) -> bool:
        """A step that never stops the thread: whatever a step raises ends every sequence (running and
        waiting) with it as the error, rather than leaving their clients waiting forever."""
        try:
            return self.step(first)
        except Exception as exc:  # a bug or a model answering with the wrong outputs: said, not hidden
            with self._lock:
                left = list(self.running) + list(self._waiting)
                self._waiting.clear()
            self._fail(left, f"generation failed: {type(exc).__name__}: {exc}")
            self._leave_ended()
            self._events.occupancy(len(self.running), 0, self.reserved, self.kv_used())
            return False

    def stop(self, message: str = "the model is unloading") -> None:
        """Stop stepping; every sequence still running or waiting ends with an error."""
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._watch.close()
        with self._lock:
            left = list(self.running) + list(self._waiting)
            self._waiting.clear()
        self._fail(left, message)
        self._leave_ended()
