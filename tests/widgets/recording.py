"""A small, deterministic recording of a demo session: two models, two emulated devices, load rising."""

from __future__ import annotations

from triton_ge_console.sessions.observe.snapshot import (
    DeviceSnapshot,
    Endpoints,
    Latency,
    ModelSnapshot,
    ServerSnapshot,
)

GIB = 1024**3
T0 = 1_700_000_000.0


def llama(step: int) -> ModelSnapshot:
    """llama_model under rising load; its latency summary is missing at step 0."""
    return ModelSnapshot(
        name="llama_model", version="1", state="READY", backend="ge", queue_depth=step * 2,
        request_rate=10.0 * step, inference_rate=30.0 * step, execution_rate=5.0 * step,
        avg_batch=None if step == 0 else 2.5,
        latency=Latency(avg_ms=None if step == 0 else 4.0 * step, p50_ms=None if step == 0 else 3.0 * step,
                        p90_ms=None, p99_ms=None if step == 0 else 9.0 * step, source="summary"),
        queue_ms=1.0, compute_ms=3.0, success_total=100 * step, failure_total=step, timed_out_total=step,
        devices=("0",), execution_mode="cpu-emulated", memory_by_device=(("0", 3 << 30),),
    )


def bert(step: int) -> ModelSnapshot:
    """bert_model failed to load."""
    return ModelSnapshot(name="bert_model", version="1", state="UNAVAILABLE", backend="ge",
                         reason="failed to load 'bert_model': om_model_path does not exist", failure_total=2)


def device(device_id: str, step: int) -> DeviceSnapshot:
    """An emulated NPU whose utilization rises with the step."""
    return DeviceSnapshot(id=device_id, kind="cpu-emulated", name="910B", utilization=0.2 * step,
                          memory_used_bytes=int(21.4 * GIB), memory_total_bytes=64 * GIB,
                          temperature_c=None, power_w=None, health="OK", source="ge-glue")


def snapshot(step: int) -> ServerSnapshot:
    """Step `step` of the recording, one second apart."""
    return ServerSnapshot(
        taken_at=T0 + step, session="demo", live=True, ready=True, version="2.51.0", uptime_s=3600.0 + step,
        endpoints=Endpoints(http_url="http://127.0.0.1:8000"), models=(llama(step), bert(step)),
        devices=(device("0", step), device("1", 0)),
    )


def down(step: int) -> ServerSnapshot:
    """The server stopped answering."""
    return ServerSnapshot(taken_at=T0 + step, session="demo", error="connection refused (127.0.0.1:8000)")


def recording(steps: int = 4) -> list[ServerSnapshot]:
    """`steps` snapshots of rising load."""
    return [snapshot(i) for i in range(steps)]
