"""Writes the recorded snapshot streams the console's snapshot tests replay (run once; output committed)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from triton_ge_console.sessions.observe.recorded import RecordedSource
from triton_ge_console.sessions.observe.snapshot import (
    DeviceSnapshot,
    Endpoints,
    Latency,
    ModelSnapshot,
    ServerSnapshot,
)

HERE = Path(__file__).resolve().parent
START = 1_790_000_000.0
GIB = 1024**3
ENDPOINTS = Endpoints("http://127.0.0.1:41231", "127.0.0.1:41232", "http://127.0.0.1:41233/metrics")


def _wave(step: int, period: float, low: float, high: float) -> float:
    """A smooth deterministic figure between low and high."""
    return low + (high - low) * (0.5 + 0.5 * math.sin(step / period))


def _llama(step: int) -> ModelSnapshot:
    return ModelSnapshot(
        name="llama_model", version="1", state="READY", backend="ge", queue_depth=step % 5,
        request_rate=round(_wave(step, 6, 30, 45), 1), inference_rate=round(_wave(step, 6, 90, 130), 1),
        execution_rate=round(_wave(step, 6, 30, 45), 1), avg_batch=2.9,
        latency=Latency(avg_ms=20.0, p50_ms=round(_wave(step, 5, 18, 24), 2),
                        p99_ms=round(_wave(step, 4, 40, 60), 2), source="summary"),
        queue_ms=6.2, compute_ms=13.8, success_total=1000 + 40 * step, failure_total=0, timed_out_total=0,
        devices=("0",), execution_mode="cpu-emulated", memory_by_device=(("0", int(13.5 * GIB)),),
    )


def _bert(step: int) -> ModelSnapshot:
    return ModelSnapshot(
        name="bert_model", version="1", state="READY", backend="ge", queue_depth=0,
        request_rate=12.0, inference_rate=12.0, execution_rate=12.0, avg_batch=1.0,
        latency=Latency(avg_ms=3.0, p50_ms=3.1, p99_ms=round(_wave(step, 3, 5, 7), 2), source="summary"),
        queue_ms=0.4, compute_ms=2.7, success_total=500 + 12 * step, failure_total=2,
        failures_by_reason=(("REJECTED", 2),), timed_out_total=2, devices=("1",),
        execution_mode="cpu-emulated", memory_by_device=(("1", int(6.1 * GIB)),),
    )


def _devices(step: int) -> tuple[DeviceSnapshot, ...]:
    return (
        DeviceSnapshot("0", "cpu-emulated", "910B", round(_wave(step, 7, 0.3, 0.9), 3), int(21.4 * GIB),
                       64 * GIB, None, None, "OK", "ge-glue"),
        DeviceSnapshot("1", "cpu-emulated", "910B", round(_wave(step, 9, 0.02, 0.1), 3), int(6.1 * GIB),
                       64 * GIB, None, None, "OK", "ge-glue"),
    )


def healthy(steps: int = 40) -> list[ServerSnapshot]:
    """A demo session serving both models, figures moving."""
    return [ServerSnapshot(START + i, "demo", True, True, "2.51.0", 761.0 + i, ENDPOINTS,
                           (_llama(i), _bert(i)), _devices(i)) for i in range(steps)]


def disconnected() -> list[ServerSnapshot]:
    """Healthy, then the server stops answering."""
    good = healthy(20)
    lost = ServerSnapshot(START + 20, "demo", endpoints=ENDPOINTS,
                          error="connection refused: http://127.0.0.1:41231/v2/health/live")
    return [*good, lost]


def unavailable() -> list[ServerSnapshot]:
    """bert_model failed to load: UNAVAILABLE with Triton's reason."""
    reason = ("failed to load 'bert_model' version 1: Internal: CompileGraph failed: "
              "ge_compile returned 1343225860")
    out = []
    for snap in healthy(20):
        bert = dataclasses.replace(snap.models[1], state="UNAVAILABLE", reason=reason, queue_depth=None,
                                   request_rate=None, inference_rate=None, execution_rate=None,
                                   avg_batch=None,
                                   latency=Latency(), queue_ms=None, compute_ms=None)
        out.append(dataclasses.replace(snap, models=(snap.models[0], bert)))
    return out


def failing() -> list[ServerSnapshot]:
    """llama_model's instance process was killed: READY in Triton's index, every request failing."""
    reason = "instance process gone: llama_model_0 (killed or crashed)"
    out = []
    for step, snap in enumerate(healthy(20)):
        llama = snap.models[0]
        if step >= 12:
            llama = dataclasses.replace(llama, health="FAILING", reason=reason, request_rate=0.0,
                                        inference_rate=0.0, execution_rate=0.0, avg_batch=None,
                                        latency=Latency(), queue_ms=None, compute_ms=None,
                                        success_total=1000 + 40 * 12, failure_total=40 * (step - 11),
                                        failures_by_reason=(("BACKEND", 40 * (step - 11)),))
        out.append(dataclasses.replace(snap, models=(llama, snap.models[1])))
    return out


if __name__ == "__main__":
    RecordedSource.save(healthy(), HERE / "healthy.jsonl")
    RecordedSource.save(disconnected(), HERE / "disconnected.jsonl")
    RecordedSource.save(unavailable(), HERE / "unavailable.jsonl")
    RecordedSource.save(failing(), HERE / "failing.jsonl")
