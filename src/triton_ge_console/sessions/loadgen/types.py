"""What a load run is asked to do (LoadSpec), reports as it goes (Progress) and at the end (BenchRow)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triton_ge_console.sessions.loadgen.inputs import LoadSpecError
from triton_ge_console.sessions.loadgen.transport import PROTOCOLS

DISTRIBUTIONS = ("constant", "poisson")


@dataclass(frozen=True)
class LoadSpec:
    """One benchmark: a model, an endpoint, and either a concurrency sweep or a request-rate sweep."""

    model: str
    url: str  # host:port of the endpoint for `protocol` (gRPC port for grpc, HTTP port for http)
    protocol: str = "grpc"
    concurrency: tuple[int, ...] = (1,)  # closed loop: this many requests always in flight, per step
    rate: tuple[float, ...] = ()  # open loop (requests/s) per step; when given, concurrency is ignored
    distribution: str = "constant"  # inter-arrival times in rate mode: constant | poisson
    batch_size: int = 1
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # dims for -1, no batch dim
    input_files: Mapping[str, Path] = field(default_factory=dict)  # inputs given as .npy files
    window_ms: int = 1500
    warmup_ms: int = 1000
    max_windows: int = 10
    stable_windows: int = 3  # this many consecutive windows ...
    stability: float = 0.10  # ... whose throughputs lie within this fraction of their mean
    max_inflight: int = 1024  # open-loop cap; later sends are still timed from their scheduled instant
    http_json_body: bool = False  # send tensors as JSON instead of Triton's binary extension
    headers: Mapping[str, str] = field(default_factory=dict)  # sent with every call (e.g. a session token)
    priority: int = 0  # Triton's request priority level (0: the model's default level)
    timeout_us: int = 0  # the request's own queue timeout (0: none; applies where the model allows override)
    seed: int = 0

    @property
    def mode(self) -> str:
        """'rate' when a rate sweep was asked for, else 'concurrency'."""
        return "rate" if self.rate else "concurrency"

    @property
    def levels(self) -> tuple[float, ...]:
        """The sweep's steps: rates or concurrencies."""
        return tuple(self.rate) if self.rate else tuple(float(c) for c in self.concurrency)

    def validate(self) -> None:
        """Raise LoadSpecError naming the first option that cannot work."""
        if not self.model:
            raise LoadSpecError("a model name is required")
        if self.protocol not in PROTOCOLS:
            raise LoadSpecError(f"--protocol {self.protocol}: expected one of {', '.join(PROTOCOLS)}")
        if self.distribution not in DISTRIBUTIONS:
            raise LoadSpecError(f"--distribution {self.distribution}: expected one of "
                                f"{', '.join(DISTRIBUTIONS)}")
        if not self.rate and (not self.concurrency or any(c < 1 for c in self.concurrency)):
            raise LoadSpecError(f"--concurrency {_csv(self.concurrency)}: levels must be integers >= 1")
        if any(not r > 0 for r in self.rate):
            raise LoadSpecError(f"--rate {_csv(self.rate)}: every rate must be > 0 requests/s")
        if self.batch_size < 1:
            raise LoadSpecError(f"--batch-size {self.batch_size}: must be at least 1")
        if self.window_ms < 50 or self.warmup_ms < 0:
            raise LoadSpecError("--window-ms must be at least 50 and --warmup-ms not negative")
        if self.stable_windows < 1 or self.max_windows < self.stable_windows:
            raise LoadSpecError(f"--max-windows {self.max_windows}: must be at least {self.stable_windows}")
        if self.max_inflight < 1:
            raise LoadSpecError("max_inflight must be at least 1")
        if self.priority < 0 or self.timeout_us < 0:
            raise LoadSpecError("--priority and --timeout-us must not be negative")


def _csv(values: tuple[float, ...] | tuple[int, ...]) -> str:
    """Values as the operator typed them."""
    return ",".join(f"{v:g}" for v in values)


@dataclass(frozen=True)
class Progress:
    """Where a run is, for a progress display: emitted at every phase change and after every window."""

    mode: str  # "concurrency" | "rate"
    level: float  # the current step's concurrency or rate
    step: int  # 1-based index of the current step
    steps: int
    phase: str  # "connecting" | "warmup" | "measuring" | "step-done" | "done" | "stopped"
    window: int = 0  # windows measured so far in this step
    max_windows: int = 0
    window_throughput_rps: float | None = None
    window_p50_ms: float | None = None
    completed: int = 0  # successful requests in this step so far (measured windows)
    errors: int = 0
    elapsed_s: float = 0.0  # since the run started
    row: BenchRow | None = None  # the finished step's row, on "step-done"


@dataclass(frozen=True)
class RunContext:
    """What a run measured against, so its figures can be compared later: the model, inputs, server."""

    model: str
    protocol: str
    url: str
    batch_size: int
    started_at: str  # ISO 8601, UTC
    input_shapes: Mapping[str, tuple[int, ...]]  # as sent, the batch dimension included where it batches
    server_version: str | None
    config_digest: str | None  # sha256 of the model config the server reported

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        shapes = {name: list(dims) for name, dims in self.input_shapes.items()}
        return {**dataclasses.asdict(self), "input_shapes": shapes}


@dataclass(frozen=True)
class BenchRow:
    """One step's result: client latency and throughput plus Triton's own split over the same windows."""

    model: str
    protocol: str
    batch_size: int
    concurrency: int | None
    rate: float | None
    throughput_rps: float  # successful requests per second
    inferences_per_s: float  # throughput x batch size
    p50_ms: float | None
    p90_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    avg_ms: float | None
    max_ms: float | None
    requests: int
    errors: int
    windows: int
    stable: bool
    server_queue_ms: float | None
    server_compute_input_ms: float | None
    server_compute_infer_ms: float | None
    server_compute_output_ms: float | None
    server_compute_ms: float | None
    client_cpu: float | None  # generator CPU seconds / wall seconds (1.0 = one core busy)
    send_rate_rps: float | None = None  # rate mode: requests actually sent per second
    first_error: str | None = None
    rejected: int = 0  # the step's requests Triton refused because the model's queue was full
    timed_out: int = 0  # the step's requests whose queue timeout expired before they ran

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON and CSV."""
        return dataclasses.asdict(self)


ROW_FIELDS = tuple(f.name for f in dataclasses.fields(BenchRow))
