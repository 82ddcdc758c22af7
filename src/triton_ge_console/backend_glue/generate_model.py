"""The decoupled `ge` model that generates tokens: requests join the instance's scheduler, which streams
each one's tokens back through its response sender from its own thread (execute returns at once)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from triton_ge_console.backend_glue import generate_protocol
from triton_ge_console.backend_glue.executor import Executor, RunStats
from triton_ge_console.backend_glue.generate_batch import LayoutError, kv_layout, vocab_size
from triton_ge_console.backend_glue.generate_metrics import GenerateMetrics
from triton_ge_console.backend_glue.generate_scheduler import Events, Lifetime, Limits, NoEvents, Scheduler
from triton_ge_console.backend_glue.generate_text import TextCodec, TextStream
from triton_ge_console.backend_glue.ledger import DeviceLedger
from triton_ge_console.backend_glue.loading import open_executor
from triton_ge_console.backend_glue.onnx_executor import OnnxRuntimeExecutor, trim_heap
from triton_ge_console.backend_glue.settings import (
    GlueConfigError,
    GlueSettings,
    load_settings,
    parameter,
    resolve_path,
)
from triton_ge_console.backend_glue.telemetry import Telemetry
from triton_ge_console.model_files.context import declared_context

# Context (tokens) past which a prefill chunk's memory is handed back after its run: attention over it
# takes tens of MiB a chunk; below it, giving back only makes the next runs fault the pages in again.
RELEASE_AFTER = 1024
SENDER_THREADS = 2  # one for each of this host's cores; each stream keeps to one
NPU_NOT_SUPPORTED = (
    "generation runs in CPU emulation only for now: driving an OM's dynamic sequence dims (past length "
    "growing every step) through AscendCL is not supported yet; set parameters.execution_mode cpu")


def _pb_utils() -> Any:
    """Triton's Python backend utilities (only importable inside the stub)."""
    import triton_python_backend_utils as pb_utils

    return pb_utils


class Responder:
    """Sends the streams' responses from threads of their own, each stream's in the order given: a response
    sender's send() waits for the server to take the response (an IPC round trip), which would otherwise
    hold the scheduler's decode step once per running sequence. Each stream keeps to one of
    SENDER_THREADS threads, so several streams' round trips overlap. A stream's first token goes out at
    once from the caller's thread instead (nothing of that stream can be queued before it): waking a
    sender thread would add its wake-up to the time to first token."""

    def __init__(self, pb_utils: Any, model: str, threads: int = SENDER_THREADS) -> None:
        self._pb = pb_utils
        self._model = model
        self._queues: list[queue.SimpleQueue[tuple[TritonStream, str, Any] | None]] = [
            queue.SimpleQueue() for _ in range(threads)]
        self._threads = [threading.Thread(target=self._loop, args=(q,), name="ge-generate-send", daemon=True)
                         for q in self._queues]
        self._next = itertools.count()
        for thread in self._threads:
            thread.start()

    def lane(self) -> int:
        """The sender thread a new stream keeps to."""
        return next(self._next) % len(self._queues)

    def put(self, stream: TritonStream, kind: str, value: Any) -> None:
        """Queue one response: ("token", id), ("last", id), ("error", message) or ("cancelled", None)."""
        self._queues[stream.lane].put((stream, kind, value))

    def send_now(self, stream: TritonStream, kind: str, value: Any) -> None:
        """Send one response from this thread (a stream's first: nothing of it is queued)."""
        self._deliver(stream, kind, value)

    def _loop(self, responses: queue.SimpleQueue[tuple[TritonStream, str, Any] | None]) -> None:
        """Send until closed."""
        while (item := responses.get()) is not None:
            self._deliver(*item)

    def _deliver(self, stream: TritonStream, kind: str, value: Any) -> None:
        """Send one response; a send that fails marks its stream gone (the scheduler then ends it)."""
        if stream.gone and kind in ("token", "last"):
            return
        try:
            if kind == "token":
                self._send(stream, kind, value)
                return
            with stream.lock:  # the final response: no cancel question crosses it
                stream.done = True
                self._send(stream, kind, value)
        except Exception:  # the Python backend's own error types: the request is gone
            stream.gone = True

    def _send(self, stream: TritonStream, kind: str, value: Any) -> None:
        """Build and send one response."""
        pb = self._pb
        final = pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        if kind in ("token", "last"):
            tensors = [pb.Tensor("token_id", np.array([value], np.int64))]
            if stream.text is not None:
                piece = stream.text.piece(value, kind == "last")
                tensors.append(pb.Tensor("text_output", np.array([piece.encode("utf-8")], np.object_)))
            stream.sender.send(pb.InferenceResponse(output_tensors=tensors),
                               flags=final if kind == "last" else 0)
        elif kind == "error":
            stream.sender.send(pb.InferenceResponse(error=pb.TritonError(f"model {self._model}: {value}")),
                               flags=final)
        else:  # cancelled: the final response as Triton's Python backend documents it
            code = getattr(pb.TritonError, "CANCELLED", None)
            error = pb.TritonError("cancelled", code) if code is not None else pb.TritonError("cancelled")
            stream.sender.send(pb.InferenceResponse(error=error), flags=final)

    def close(self) -> None:
        """Send what is queued, then stop."""
        for responses in self._queues:
            responses.put(None)
        for thread in self._threads:
            thread.join(timeout=10)


Admitted = tuple["TritonStream", dict[str, np.ndarray], dict[str, Any]]


class Intake:
    """Text prompts tokenized and queued on a thread of their own, in the order they came: on execute's
    thread a long text would hold every request behind it (and, before the first step, their first
    tokens); the tokenizer lets go of the GIL, so the stepping thread goes on meanwhile."""

    def __init__(self, admit: Callable[[TritonStream, dict[str, np.ndarray], dict[str, Any]], None]) -> None:
        self._admit = admit
        self._queue: queue.SimpleQueue[Admitted | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="ge-generate-text", daemon=True)
        self._thread.start()

    def put(self, item: Admitted) -> None:
        """Tokenize and queue this request next."""
        self._queue.put(item)

    def _loop(self) -> None:
        """Admit until closed."""
        while (item := self._queue.get()) is not None:
            self._admit(*item)

    def close(self) -> None:
        """Admit what is queued, then stop."""
        self._queue.put(None)
        self._thread.join(timeout=10)


class TritonStream:
    """A Scheduler Stream over one request's response sender; its responses go out through the Responder."""

    def __init__(self, responder: Responder, sender: Any, text: TextStream | None = None) -> None:
        self._responder = responder
        self.lane = responder.lane()
        self.sender = sender
        self.text = text  # the stream's text pieces (decoded on the Responder's thread), with a tokenizer
        self.gone = False  # a send failed: the client is no longer there
        self.done = False  # its final response went out: Triton deleted its response factory
        self.lock = threading.Lock()  # a question about cancelling never crosses the final response
        self.started = False  # its first token is queued or sent

    def send(self, token: int, final: bool) -> bool:
        """Queue one response holding one token id (the first sent at once); False once a send has failed
        (client gone)."""
        if self.gone:
            return False
        kind = "last" if final else "token"
        if self.started:
            self._responder.put(self, kind, token)
        else:
            self.started = True
            self._responder.send_now(self, kind, token)
        return not self.gone

    def fail(self, message: str) -> None:
        """The final response: an error naming the model."""
        self._responder.put(self, "error", message)

    def cancelled(self) -> bool:
        """Whether Triton marked the request cancelled (the client cancelled, or its stream closed); never
        asked once the final response is out (the backend would look up a response factory it deleted)."""
        with self.lock:
            if self.gone or self.done:
                return self.gone
            try:
                return bool(self.sender.is_cancelled())
            except Exception:  # a sender that cannot say is one whose request is gone
                return True

    def close_cancelled(self) -> None:
        """The final response of a cancelled request."""
        self._responder.put(self, "cancelled", None)


class Endings:
    """The scheduler's events, passed on to the token metrics; a sequence ended by an error also counts as
    a failed request in the glue's telemetry: Triton counted it a success when execute returned (python
    backend r24.06 on, see sessions/glue_failures), so without this a model whose every generation fails
    would read healthy. A cancel or a refused request is the client's doing, not a failure."""

    def __init__(self, metrics: GenerateMetrics | None, telemetry: Telemetry | None) -> None:
        self._metrics: Events = metrics or NoEvents()
        self._counted = metrics
        self._telemetry = telemetry

    def first_token(self, seconds: float, prompt_tokens: int) -> None:
        """Passed on."""
        self._metrics.first_token(seconds, prompt_tokens)

    def next_token(self, seconds: float) -> None:
        """Passed on."""
        self._metrics.next_token(seconds)

    def ended(self, reason: str, lifetime: Lifetime) -> None:
        """Passed on; an error counted as a failed request too."""
        if reason == "error" and self._telemetry is not None:
            self._telemetry.failed()
        self._metrics.ended(reason, lifetime)

    def occupancy(self, running: int, waiting: int, kv_bytes: int, kv_used: int) -> None:
        """Passed on."""
        self._metrics.occupancy(running, waiting, kv_bytes, kv_used)

    def rejected(self) -> None:
        """A request refused before it ran (its fields, its size, a full queue): counted apart, as vLLM
        counts rejected requests, never as a failed request of the model."""
        if self._counted is not None:
            self._counted.rejected()


class GenerateModel:
    """One instance of a generate model: an executor, its scheduler, and their metrics."""

    settings: GlueSettings
    executor: Executor

    def initialize(self, args: dict[str, str]) -> None:
        """Open the executor, check it is a KV decoder, reserve its memory and KV cache, start stepping."""
        pb_utils = self.pb_utils = _pb_utils()
        config = json.loads(args["model_config"])
        self.settings = settings = load_settings(args, config)
        where = f"model {settings.model_name} ({settings.model_dir / 'config.pbtxt'})"
        if settings.mode == "npu":
            raise GlueConfigError(f"{where}: {NPU_NOT_SUPPORTED}")
        self.executor = open_executor(settings, config)
        self.owner = f"{os.getpid()}:{settings.model_name}:{settings.instance_name}"
        try:
            layout = kv_layout(self.executor.inputs, self.executor.outputs)
            limits, context_from = self._limits(config, where)
            self._observe(self._reserve(limits.kv_cache_bytes), limits.kv_cache_bytes)
            self._take_text(config, where)
            self.responder = Responder(pb_utils, settings.model_name)
            self.endings = Endings(self.metrics, self.telemetry)
            self.scheduler = Scheduler(self._run, layout, limits, self.endings,
                                       vocab=vocab_size(self.executor.outputs), idle=trim_heap)
        except LayoutError as exc:
            self.finalize()
            raise GlueConfigError(f"{where}: {settings.onnx_path}: {exc}") from None
        except BaseException:
            with contextlib.suppress(Exception):  # the load failure is the error worth reporting
                self.finalize()
            raise
        self.scheduler.start()
        pb_utils.Logger.log_info(
            f"ge glue: model {settings.model_name} instance {settings.instance_name} generates "
            f"(execution_mode={settings.kind}, max_running={limits.max_running}, "
            f"max_model_len={limits.max_model_len} from {context_from}, "
            f"max_num_batched_tokens={limits.max_batched_tokens}, "
            f"kv_cache={limits.kv_cache_bytes} bytes, {layout.bytes_per_token} bytes/token) "
            f"source={settings.onnx_path}")

    def _limits(self, config: dict[str, Any], where: str) -> tuple[Limits, str]:
        """The config's generate limits, its context settled against what the export declares, and where
        that context came from."""
        values = {key: parameter(config, key) for key in generate_protocol.PARAMETERS}
        limits = generate_protocol.limits_from({k: v for k, v in values.items() if v is not None}, where)
        onnx_path = self.settings.onnx_path
        declared = (declared_context(getattr(self.executor, "metadata", {}), onnx_path)
                    if onnx_path is not None else None)
        return generate_protocol.with_context(limits, declared, where)

    def _reserve(self, kv_cache_bytes: int) -> int:
        """Reserve the executor's memory and the KV cache on the instance's devices, split evenly; the
        bytes reserved."""
        settings = self.settings
        self.ledgers = tuple(DeviceLedger(d) for d in settings.devices or (settings.device_id,))
        memory = self.executor.memory_bytes + kv_cache_bytes
        for ledger in self.ledgers:
            ledger.reserve(self.owner, settings.model_name, -(-memory // len(self.ledgers)),
                           settings.device_memory_bytes)
        return memory

    def _observe(self, memory: int, kv_cache_bytes: int) -> None:
        """The device telemetry and the generate metrics, each None where this Triton cannot offer it."""
        settings, pb_utils, ledgers = self.settings, self.pb_utils, self.ledgers
        self.telemetry = self._optional(lambda: Telemetry(pb_utils, settings, ledgers, None, memory))
        labels = {"model": settings.model_name, "version": settings.version_dir.name,
                  "device": str(settings.device_id), "kind": settings.kind}
        self.metrics = self._optional(lambda: GenerateMetrics(pb_utils, labels, settings.instance_name,
                                                              kv_cache_bytes))

    def _take_text(self, config: dict[str, Any], where: str) -> None:
        """With a tokenizer: its codec, the prompt's tokenizer and the intake that encodes text prompts
        (all None without one: ids only)."""
        self.codec = self._codec(config, where)
        self.tokenizer = (generate_protocol.Tokenizer(self.codec.encode, self.codec.longest_token_bytes)
                          if self.codec is not None else None)
        self.intake = Intake(self._admit) if self.codec is not None else None

    def _codec(self, config: dict[str, Any], where: str) -> TextCodec | None:
        """The model's tokenizer (parameter generate_tokenizer), or None: ids only."""
        path_text = parameter(config, generate_protocol.TOKENIZER_PARAMETER)
        key = generate_protocol.TOKENIZER_PARAMETER
        path = resolve_path(path_text, self.settings.version_dir, where, key)
        if path is None:
            return None
        try:
            return TextCodec.from_file(path)
        except ValueError as exc:
            raise GlueConfigError(f"{where}: {exc}") from None

    def _optional(self, make: Any) -> Any:
        """Metrics, or None (logged) where this Triton's Python backend cannot offer them."""
        try:
            return make()
        except Exception as exc:  # metrics must never keep a model from serving
            self.pb_utils.Logger.log_warn(f"ge glue: model {self.settings.model_name}: metrics off: {exc}")
            return None

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One execution (a prefill or a decode step), accounted like any `ge` execution."""
        started = time.perf_counter()
        outputs, stats = step_run(self.executor, feeds)
        if self.telemetry is not None:
            self.telemetry.executed(time.perf_counter() - started, int(feeds["input_ids"].shape[0]), stats)
        return outputs

    def execute(self, requests: list[Any]) -> None:
        """Queue each request with the scheduler (or refuse it at once); responses follow from its thread,
        but for the first step's when nothing was running: this thread runs it (first tokens sooner). A
        text prompt goes to the intake's thread to be tokenized, so requests behind it wait for none."""
        for request in requests:
            codec = self.codec
            stream = TritonStream(self.responder, request.get_response_sender(),
                                  codec.stream() if codec is not None else None)
            inputs, parameters = _inputs(request), _parameters(request)
            if self.intake is not None and generate_protocol.TEXT_INPUT.name in inputs:
                self.intake.put((stream, inputs, parameters))
            else:
                self._admit(stream, inputs, parameters, wake=False)
        self.scheduler.step_first()

    def _admit(self, stream: TritonStream, inputs: dict[str, np.ndarray], parameters: dict[str, Any],
               wake: bool = True) -> None:
        """Check a request and queue it with the scheduler, or refuse it."""
        try:
            wanted = generate_protocol.request_from(inputs.get, self.scheduler.limits, self.tokenizer,
                                                    parameters)
        except ValueError as exc:
            self._refuse(stream, str(exc))
            return
        refusal = self.scheduler.submit(stream, wanted, wake=wake)
        if refusal is not None:
            self._refuse(stream, refusal)

    def _refuse(self, stream: TritonStream, message: str) -> None:
        """Answer a request that will not run with one clear error (counted as rejected: the client's
        mistake or the model's bounds, not a failure of the model)."""
        stream.fail(message)
        self.endings.rejected()

    def finalize(self) -> None:
        """End every sequence, stop the metrics, give the memory back, free the executor."""
        intake = getattr(self, "intake", None)
        if intake is not None:
            intake.close()
        scheduler = getattr(self, "scheduler", None)
        if scheduler is not None:
            scheduler.stop()
        responder = getattr(self, "responder", None)
        if responder is not None:
            responder.close()
        for ledger in getattr(self, "ledgers", ()):
            ledger.release(self.owner)
        for closing in (getattr(self, "metrics", None), getattr(self, "telemetry", None)):
            if closing is not None:
                closing.close()
        executor = getattr(self, "executor", None)
        if executor is not None:
            executor.close()


def step_run(executor: Executor, feeds: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], RunStats]:
    """A prefill or decode step as the generate model runs it: on ONNX Runtime a plain run (the past grows
    every step: output buffers kept per input shapes would never be reused), the memory of a prefill
    chunk over a long context given back after it (a long prompt's otherwise stays held), else the
    executor's run."""
    if isinstance(executor, OnnxRuntimeExecutor):
        long_prefill = feeds["input_ids"].shape[1] > 1 and feeds["attention_mask"].shape[1] > RELEASE_AFTER
        return executor.run_fresh(feeds, release=long_prefill), RunStats()
    return executor.run(feeds)


def _parameters(request: Any) -> dict[str, Any]:
    """The request's parameters (Triton's generate endpoint puts each JSON field naming no input there)."""
    text = request.parameters()
    values = json.loads(text) if text else {}
    return values if isinstance(values, dict) else {}


def _inputs(request: Any) -> dict[str, np.ndarray]:
    """The request's inputs as numpy by name, read once (pb_utils.get_input_tensor_by_name lists them
    all again for each name asked)."""
    return {tensor.name(): tensor.as_numpy() for tensor in request.inputs()}
