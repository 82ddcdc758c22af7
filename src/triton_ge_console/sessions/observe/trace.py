"""Per-request latency from Triton's trace files: the console's p50/p90/p99 where the server keeps no
latency summaries (`summary_latencies` is opt-in: it costs every request), and npu_ge's only latency.

Triton refuses to move the trace file over the network, so the server starts with `trace_server_args`
(file in the session directory, tracing off); `enable` turns TIMESTAMPS tracing on per model; Triton then
writes `trace.json.0`, `.1`, ... every `log_frequency` traces (each a complete JSON array), and
`TraceCollector.update` reads only files it has not consumed yet.
"""

from __future__ import annotations

import json
import math
import time
import urllib.parse
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triton_ge_console.sessions.observe.snapshot import Latency
from triton_ge_console.sessions.observe.stats import HttpEndpoint

NS_PER_MS = 1_000_000.0
TRACE_FILE_NAME = "trace.json"  # in the session dir; Triton rotates it to trace.json.0, .1, ...
# Start/end timestamp pairs, best first: the server's own request span, then the protocol's.
SPANS = (
    ("REQUEST_START", "REQUEST_END"),
    ("HTTP_RECV_START", "HTTP_SEND_END"),
    ("GRPC_WAITREAD_START", "GRPC_SEND_END"),
)
ModelKey = tuple[str, str]


def trace_server_args(trace_file: Path) -> tuple[str, str]:
    """tritonserver flags that fix the trace file location and start with tracing off."""
    return (f"--trace-config=triton,file={trace_file}", "--trace-config=level=OFF")


def trace_files(trace_file: Path) -> list[Path]:
    """The trace file and its rotations (`trace.json.0`, `.1`, ...), oldest first."""
    folder, stem = trace_file.parent, trace_file.name
    rotated = [p for p in folder.glob(f"{stem}.*") if p.name[len(stem) + 1:].isdigit()]
    rotated.sort(key=lambda p: int(p.name[len(stem) + 1:]))
    return [*rotated, trace_file] if trace_file.exists() else rotated


def clear_trace_files(trace_file: Path) -> None:
    """Remove what an earlier run of the server traced, so its figures are never read as this run's."""
    for path in trace_files(trace_file):
        path.unlink(missing_ok=True)


def enable_tracing(endpoint: HttpEndpoint, model: str, rate: int = 10, log_frequency: int = 20,
                   count: int = -1) -> Any:
    """Trace every `rate`-th request of `model` at TIMESTAMPS level, flushing every `log_frequency` traces,
    until `count` were taken (-1: no limit)."""
    settings = {"trace_level": ["TIMESTAMPS"], "trace_rate": str(rate), "log_frequency": str(log_frequency),
                "trace_count": str(count)}
    return endpoint.json("POST", f"/v2/models/{urllib.parse.quote(model, safe='')}/trace/setting", settings)


def disable_tracing(endpoint: HttpEndpoint, model: str) -> Any:
    """Turn tracing off for one model."""
    path = f"/v2/models/{urllib.parse.quote(model, safe='')}/trace/setting"
    return endpoint.json("POST", path, {"trace_level": ["OFF"]})


@dataclass(frozen=True)
class TracedRequest:
    """One traced request: which model version and how long it took."""

    trace_id: int
    model: str
    version: str
    latency_ms: float


def requests_from_events(events: Iterable[dict[str, Any]]) -> list[TracedRequest]:
    """Group a trace file's events by trace id and measure each request's span."""
    models: dict[int, tuple[str, str]] = {}
    stamps: dict[int, dict[str, int]] = {}
    for event in events:
        trace_id = event.get("id")
        if not isinstance(trace_id, int):
            continue
        if "model_name" in event:
            models[trace_id] = (str(event["model_name"]), str(event.get("model_version", "")))
        for stamp in event.get("timestamps", ()):
            stamps.setdefault(trace_id, {})[str(stamp.get("name"))] = int(stamp.get("ns", 0))
    found = []
    for trace_id, (model, version) in models.items():
        latency = _span_ms(stamps.get(trace_id, {}))
        if latency is not None:
            found.append(TracedRequest(trace_id, model, version, latency))
    return found


def _span_ms(stamps: dict[str, int]) -> float | None:
    """The first complete start/end span of one request, in milliseconds."""
    for start, end in SPANS:
        if start in stamps and end in stamps and stamps[end] >= stamps[start]:
            return (stamps[end] - stamps[start]) / NS_PER_MS
    return None


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    rank = max(1, min(len(sorted_values), math.ceil(fraction * len(sorted_values))))
    return sorted_values[rank - 1]


class TraceCollector:
    """Reads trace files incrementally and keeps each model's recent request latencies."""

    def __init__(self, trace_file: Path, window: int = 1024, max_age_s: float = 60.0,
                 keep_files_s: float = 300.0) -> None:
        self.trace_file = trace_file
        self._max_age_s = max_age_s
        self._keep_files_s = keep_files_s
        self._window = window
        self._consumed: dict[Path, int] = {}  # file -> size when fully read
        self._seen: dict[Path, set[int]] = {}  # file -> trace ids already counted
        self._samples: dict[ModelKey, deque[tuple[float, float]]] = {}

    def update(self) -> int:
        """Read what Triton wrote since the last update; returns how many requests were new."""
        added = 0
        now = time.time()
        for path in trace_files(self.trace_file):
            added += self._read(path, now)
        self._prune(now)
        return added

    def _prune(self, now: float) -> None:
        """Delete rotated files read long ago (a busy model writes megabytes a minute); the delay leaves
        them to other consoles watching the same session."""
        for path in list(self._consumed):
            if path == self.trace_file:
                continue
            try:
                if now - path.stat().st_mtime > self._keep_files_s:
                    path.unlink()
            except OSError:
                pass
            if not path.exists():
                self._consumed.pop(path, None)
                self._seen.pop(path, None)

    def _read(self, path: Path, now: float) -> int:
        """Consume one file if it changed and holds complete JSON (a half-written one is retried later).

        Its requests are stamped with when Triton wrote the file (they ended by then), never when it is
        read: a file written minutes ago, by this run or an earlier one, is not the last minute."""
        try:
            info = path.stat()
            size, written = info.st_size, min(now, info.st_mtime)
            if size == self._consumed.get(path):
                return 0
            events = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return 0
        if size < self._consumed.get(path, 0):
            self._seen.pop(path, None)  # rewritten by a new server: a different file
        seen = self._seen.setdefault(path, set())
        added = 0
        for request in requests_from_events(events if isinstance(events, list) else ()):
            if request.trace_id in seen:
                continue
            seen.add(request.trace_id)
            key = (request.model, request.version)
            self._samples.setdefault(key, deque(maxlen=self._window)).append((written, request.latency_ms))
            added += 1
        self._consumed[path] = size
        return added

    def latency(self, model: str, version: str) -> Latency | None:
        """Average and percentiles of the model's recently traced requests, with source "trace"."""
        samples = self._samples.get((model, version))
        if not samples:
            return None
        horizon = time.time() - self._max_age_s
        values = sorted(ms for seen_at, ms in samples if seen_at >= horizon)
        if not values:
            return None
        return Latency(
            avg_ms=sum(values) / len(values),
            p50_ms=percentile(values, 0.50),
            p90_ms=percentile(values, 0.90),
            p99_ms=percentile(values, 0.99),
            source="trace",
        )

    def traced_models(self) -> frozenset[ModelKey]:
        """Model versions with any traced request."""
        return frozenset(self._samples)
