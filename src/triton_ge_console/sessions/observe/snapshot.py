"""Immutable, timestamped views of a running server: what the console and notebooks render.

Every figure a source could not obtain is `None`; nothing here raises for a missing number.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from triton_ge_console.session_states import NOT_ANSWERING
from triton_ge_console.sessions.observe.generation import GenerationFigures
from triton_ge_console.sessions.server.engines import label
from triton_ge_console.triton_terms import FAILING, HELD_STATES, SERVER_DOWN, SERVER_LIVE, SERVER_READY

STARTING_MESSAGE = "server starting"  # a session's snapshot before its server answers (its error)


@dataclass(frozen=True, slots=True)
class Endpoints:
    """Where a server answers."""

    http_url: str | None = None
    grpc_url: str | None = None
    metrics_url: str | None = None


@dataclass(frozen=True, slots=True)
class Latency:
    """Per-request latency figures with where they came from ("summary", "statistics", "trace")."""

    avg_ms: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class ModelSnapshot:
    """One model version at one instant."""

    name: str
    version: str
    state: str  # READY | UNAVAILABLE | LOADING | UNLOADING | UNKNOWN
    reason: str | None = None  # why it is not serving: Triton's (not READY) or ours (FAILING)
    backend: str | None = None
    queue_depth: int | None = None
    request_rate: float | None = None  # successful requests per second
    inference_rate: float | None = None  # inferences (batch items) per second
    execution_rate: float | None = None  # backend executions per second
    avg_batch: float | None = None
    latency: Latency = field(default_factory=Latency)
    queue_ms: float | None = None  # average queue time per request over the last interval
    compute_ms: float | None = None  # average compute (input + infer + output) per request
    success_total: int | None = None
    failure_total: int | None = None
    failures_by_reason: tuple[tuple[str, int], ...] = ()
    # requests the queue policy rejected when their queue timeout expired: Triton 2.51 counts them as failure
    # reason REJECTED; a request refused because the queue was full is answered before Triton counts it, so
    # it shows in no server figure (the load generator counts those)
    timed_out_total: int | None = None
    last_inference: float | None = None  # epoch seconds
    devices: tuple[str, ...] = ()  # device ids it runs on, e.g. ("0",)
    execution_mode: str | None = None  # "npu" | "cpu-emulated" as the glue reports it
    memory_by_device: tuple[tuple[str, int], ...] = ()  # (device id, bytes its instances hold there)
    health: str | None = None  # OK | FAILING (READY, yet its instance died or all requests fail) | NOT_READY
    generation: GenerationFigures | None = None  # a generate model's token figures (None: not one)

    @property
    def failing(self) -> bool:
        """READY in Triton's index, yet not serving (see `sessions.observe.health`)."""
        return self.health == FAILING

    @property
    def serving_state(self) -> str:
        """What views show as its state: Triton's, or FAILING for a READY model that does not serve."""
        return FAILING if self.failing else self.state

    @property
    def queue_share(self) -> float | None:
        """The part of a request's time spent queued (0..1), None when either figure is missing."""
        queue, compute = self.queue_ms, self.compute_ms
        if queue is None or compute is None or queue + compute <= 0:
            return None
        return queue / (queue + compute)


@dataclass(frozen=True, slots=True)
class DeviceSnapshot:
    """One NPU (or emulated NPU) at one instant."""

    id: str
    kind: str  # "npu" | "cpu-emulated"
    name: str | None = None  # "910B", "310P3", ...
    utilization: float | None = None  # 0..1
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    health: str | None = None  # "OK", "Warning", ..., "unknown" (npu-exporter's -1)
    source: str | None = None  # "ge-glue", "npu-smi", "npu-exporter"
    npu_id: int | None = None  # npu-smi's NPU ID: the card
    chip_id: int | None = None  # npu-smi's Chip ID on that card
    logical_id: int | None = None  # AscendCL's device id (device_ids); `id` is this when it is known
    phy_id: int | None = None  # the chip's physical id (npu-exporter's `id` label)
    bus_id: str | None = None  # PCIe bus id
    id_source: str | None = None  # what gave logical_id (npu-smi's Device column, `npu-smi info -m`, ...)
    power_note: str | None = None  # what power_w measures when it is not this chip's own draw

    def place(self) -> str | None:
        """Where npu-smi shows this chip ("npu 2 chip 0"), so an operator can match the two; None unknown."""
        if self.npu_id is None:
            return None
        return f"npu {self.npu_id} chip {'?' if self.chip_id is None else self.chip_id}"


@dataclass(frozen=True, slots=True)
class EngineMemory:
    """One vllm-ascend worker's NPU memory after warm-up, as ms_service_metric reports it per data-parallel
    rank (engine:memory:*, GiB); None where the server did not report a figure."""

    dp: str
    total_gib: float | None = None  # the NPU's memory
    utilization: float | None = None  # the share vLLM may take (--gpu-memory-utilization)
    reserved_gib: float | None = None  # what that share is
    weights_gib: float | None = None
    kv_cache_gib: float | None = None
    non_torch_gib: float | None = None
    activation_gib: float | None = None  # peak during the profile run
    graph_gib: float | None = None  # captured graphs


@dataclass(frozen=True, slots=True)
class ServerSnapshot:
    """Everything known about one session's server at `taken_at` (epoch seconds)."""

    taken_at: float
    session: str
    live: bool = False
    ready: bool = False
    version: str | None = None
    uptime_s: float | None = None
    endpoints: Endpoints = field(default_factory=Endpoints)
    models: tuple[ModelSnapshot, ...] = ()
    devices: tuple[DeviceSnapshot, ...] = ()
    error: str | None = None  # why the server could not be read, when it could not
    restarts: int | None = None  # how often its supervisor restarted it after a crash (None: not ours)
    last_event: str | None = None  # the newest of its session's events (a crash, a restart), in words
    no_reply: bool = False  # it took the connection but sent no reply within the poll's timeout (hung)
    engine: str | None = None  # None: Triton; "vllm" | "mindie" for an engine ge-console only watches
    # what a server that answers does not give, in words (a MindIE with its monitoring switch off): not a
    # failed poll, so its models still show, with their figures None
    note: str | None = None
    engine_memory: tuple[EngineMemory, ...] = ()  # vllm-ascend's NPU memory per worker, when it reports it

    @property
    def health(self) -> str:
        """ready / live / down / not answering: what Triton's health endpoints said at this instant."""
        if self.ready:
            return SERVER_READY
        if self.no_reply:
            return NOT_ANSWERING
        return SERVER_LIVE if self.live else SERVER_DOWN

    @property
    def server_name(self) -> str:
        """What serves: "Triton 2.51.0" (its version, ? when unknown), "vLLM", "MindIE"."""
        if self.engine is not None:
            return label(self.engine)
        return f"Triton {self.version or '?'}"

    def model(self, name: str) -> ModelSnapshot | None:
        """The snapshot of the model named so (its newest version), if present."""
        matches = [m for m in self.models if m.name == name]
        return max(matches, key=lambda m: version_key(m.version)) if matches else None

    def models_by_device(self) -> dict[str, list[tuple[str, int | None]]]:
        """Per NPU id, the models running on it and the bytes each holds there (None: not reported); an
        npu_ge model is on every NPU of its device_ids, with a full copy on each. An unloaded model is on
        none."""
        held: dict[str, list[tuple[str, int | None]]] = {}
        for model in (m for m in self.models if m.state in HELD_STATES):
            memory = dict(model.memory_by_device)
            for device in model.devices:
                entry = (model.name, memory.get(device))
                if entry not in held.setdefault(device, []):
                    held[device].append(entry)
        return held

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (recordings, `status --json`)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServerSnapshot:
        """Rebuild a snapshot from `to_dict` output (a recording)."""
        models = tuple(_model_from_dict(m) for m in data.get("models", ()))
        devices = tuple(DeviceSnapshot(**d) for d in data.get("devices", ()))
        memory = tuple(EngineMemory(**m) for m in data.get("engine_memory", ()))
        rest = {k: v for k, v in data.items() if k not in ("models", "devices", "endpoints", "engine_memory")}
        return cls(**rest, endpoints=Endpoints(**data.get("endpoints", {})), models=models, devices=devices,
                   engine_memory=memory)


def _model_from_dict(data: dict[str, Any]) -> ModelSnapshot:
    """A ModelSnapshot from plain data, restoring tuples that JSON turned into lists."""
    rest = {k: v for k, v in data.items()
            if k not in ("latency", "failures_by_reason", "devices", "memory_by_device", "generation")}
    generation = data.get("generation")
    return ModelSnapshot(
        **rest,
        latency=Latency(**data.get("latency", {})),
        failures_by_reason=tuple((str(k), int(v)) for k, v in data.get("failures_by_reason", ())),
        devices=tuple(data.get("devices", ())),
        memory_by_device=tuple((str(d), int(b)) for d, b in data.get("memory_by_device", ())),
        generation=None if generation is None else _generation_from_dict(generation),
    )


def _generation_from_dict(data: dict[str, Any]) -> GenerationFigures:
    """GenerationFigures from plain data (its endings back to pairs)."""
    ended = tuple((str(reason), int(count)) for reason, count in data.get("ended_by_reason", ()))
    return GenerationFigures(**{**data, "ended_by_reason": ended})


def version_key(version: str) -> tuple[int, str]:
    """Sort versions numerically where they are numbers."""
    return (int(version), "") if version.isdigit() else (-1, version)


def guarded_poll(lock: threading.Lock, poll: Callable[[float], ServerSnapshot],
                 down: Callable[[float, str], ServerSnapshot]) -> ServerSnapshot:
    """One poll at a time, taken now, that never raises: whatever the server sent, a failure is the `down`
    snapshot saying so (Triton's poller and the engines' alike)."""
    with lock:
        taken_at = time.time()
        try:
            return poll(taken_at)
        except Exception as exc:  # the contract: a poll never raises, whatever the server sent
            return down(taken_at, f"poll failed: {type(exc).__name__}: {exc}")
