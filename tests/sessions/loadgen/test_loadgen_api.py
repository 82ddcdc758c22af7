"""The engine's API as the console and notebooks use it: progress, background runs, inputs."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import RunningServer
from tests.sessions.loadgen.conftest import write_repository
from triton_ge_console.sessions.loadgen.engine import MAX_KEPT_WINDOWS, StepResult, Window
from triton_ge_console.sessions.loadgen.inputs import (
    ModelSignature,
    ServedTensor,
    build_inputs,
    parse_shape_option,
)
from triton_ge_console.sessions.loadgen.run import (
    LoadError,
    LoadRun,
    LoadSpec,
    LoadSpecError,
    Progress,
    UnknownModelError,
    run_load_sync,
)

pytestmark = pytest.mark.timeout(120)

FAST = {"window_ms": 300, "warmup_ms": 200, "max_windows": 4}


def test_progress_reports_every_phase_and_the_rows(bench_server: RunningServer) -> None:
    """Connecting, warm-up, one record per window, a row per step, then done."""
    seen: list[Progress] = []
    spec = LoadSpec("delay", bench_server.grpc_hostport, concurrency=(1, 2), **FAST)
    rows = run_load_sync(spec, seen.append)

    phases = [p.phase for p in seen]
    assert phases[0] == "connecting" and phases[-1] == "done"
    assert phases.count("warmup") == 2 and phases.count("step-done") == 2
    measuring = [p for p in seen if p.phase == "measuring"]
    assert len(measuring) == sum(r.windows for r in rows)
    assert all(p.window_throughput_rps and p.window_throughput_rps > 0 for p in measuring)
    assert [p.row for p in seen if p.phase == "step-done"] == rows
    assert [p.level for p in seen if p.phase == "step-done"] == [1.0, 2.0]


def test_background_run_can_be_watched_and_stopped(bench_server: RunningServer) -> None:
    """LoadRun measures on its own thread; stop() ends it promptly with the finished steps."""
    spec = LoadSpec("delay", bench_server.grpc_hostport, concurrency=(1, 2, 4, 8), window_ms=300,
                    warmup_ms=100, max_windows=10, stability=0.0)
    run = LoadRun(spec).start()
    try:
        deadline = time.monotonic() + 30
        while len(run.rows()) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert run.rows(), "the first step never finished"
        latest = run.latest()
        assert latest is not None and latest.step >= 1
    finally:
        run.stop()
    started = time.monotonic()
    rows = run.wait(timeout=10)
    assert not run.running and time.monotonic() - started < 5
    assert run.error is None
    assert 1 <= len(rows) < 4
    assert run.latest() is not None and run.latest().phase == "stopped"  # type: ignore[union-attr]


def test_background_run_hands_over_its_error(bench_server: RunningServer) -> None:
    """A failing model's error comes back from wait() and error."""
    run = LoadRun(LoadSpec("broken", bench_server.grpc_hostport, **FAST)).start()
    with pytest.raises(LoadError, match="model says no"):
        run.wait(timeout=30)
    assert isinstance(run.error, LoadError)


def test_unknown_model_is_named(bench_server: RunningServer) -> None:
    """The server's answer for a model it does not serve."""
    with pytest.raises(UnknownModelError, match=r"'ghost'.*\(READY: broken, delay, echo\)"):
        run_load_sync(LoadSpec("ghost", bench_server.http_hostport, "http", **FAST))


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_batched_inputs_follow_the_shape_option(bench_server: RunningServer, tmp_path: Path,
                                                protocol: str) -> None:
    """Batch size, --shape for the dynamic dim, a .npy file, generated strings; inferences = batch x req."""
    features = tmp_path / "features.npy"
    np.save(features, np.arange(6, dtype=np.float64).reshape(2, 3))
    url = bench_server.grpc_hostport if protocol == "grpc" else bench_server.http_hostport
    spec = LoadSpec("echo", url, protocol, batch_size=4, shapes={"IDS": (7,)},
                    input_files={"FEATURES": features}, **FAST)
    (row,) = run_load_sync(spec)
    assert row.batch_size == 4 and row.errors == 0 and row.requests > 0
    assert row.inferences_per_s == pytest.approx(4 * row.throughput_rps)


def test_bad_shape_for_the_model_is_a_spec_error(bench_server: RunningServer) -> None:
    """A --shape that does not fit the input's rank names the input and its dims."""
    spec = LoadSpec("echo", bench_server.grpc_hostport, shapes={"IDS": (7, 2)}, **FAST)
    with pytest.raises(LoadSpecError, match=r"--shape IDS: 2 dims given.*\[-1\]"):
        run_load_sync(spec)


def test_generated_inputs_fit_the_signature() -> None:
    """-1 dims become 1 or the given size, the batch dim comes first, ids stay small, types match."""
    inputs = (ServedTensor("ids", "INT64", (-1, -1)), ServedTensor("x", "FP16", (-1, 3)),
              ServedTensor("s", "BYTES", (-1, 2)), ServedTensor("b", "BOOL", (-1,)))
    signature = ModelSignature("m", inputs, (), max_batch_size=8)
    ids, x, s, b = build_inputs(signature, batch_size=2, shapes={"ids": (5,)})
    assert ids.array.shape == (2, 5) and ids.array.dtype == np.int64 and ids.array.min() >= 0
    assert ids.array.max() < 100
    assert x.array.shape == (2, 3) and x.array.dtype == np.float16
    assert s.array.shape == (2, 2) and isinstance(s.array[0, 0], bytes)
    assert b.array.shape == (2,) and b.array.dtype == np.bool_


@pytest.mark.parametrize(("text", "message"), [
    ("ids", "expected NAME:DIMS"), ("ids:0", "positive"), (":3", "expected NAME:DIMS"),
    ("ids:3xa", "NAME:DIMS")])
def test_shape_option_errors(text: str, message: str) -> None:
    """Malformed --shape values are rejected with the value quoted."""
    with pytest.raises(LoadSpecError, match=message):
        parse_shape_option(text)


def test_shape_option_forms() -> None:
    """Both 'x' and ',' separate dims."""
    assert parse_shape_option("input:3x224x224") == ("input", (3, 224, 224))
    assert parse_shape_option("ids:1,128") == ("ids", (1, 128))


@pytest.mark.parametrize(("changes", "message"), [
    ({"concurrency": (0,)}, "--concurrency"), ({"rate": (0.0,)}, "--rate"), ({"rate": (-5.0,)}, "--rate"),
    ({"protocol": "udp"}, "--protocol"), ({"distribution": "burst"}, "--distribution"),
    ({"batch_size": 0}, "--batch-size"), ({"max_windows": 2}, "--max-windows")])
def test_spec_validation(changes: dict[str, object], message: str) -> None:
    """Each impossible option is named before any connection is made."""
    spec = LoadSpec("m", "127.0.0.1:1", **changes)  # type: ignore[arg-type]
    with pytest.raises(LoadSpecError, match=message):
        spec.validate()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_server_that_dies_mid_run_is_reported(triton_factory: Callable[..., RunningServer],
                                                 python_backends: Path, tmp_path: Path,
                                                 protocol: str) -> None:
    """A server crashing under load ends the step with errors counted and the cause kept, no hang."""
    server = triton_factory(write_repository(tmp_path / "models"), python_backends, ("delay",))
    url = server.http_hostport if protocol == "http" else server.grpc_hostport
    run = LoadRun(LoadSpec("delay", url, protocol, concurrency=(2,), window_ms=300, warmup_ms=100,
                           max_windows=8, stability=0.0)).start()
    try:
        deadline = time.monotonic() + 30
        while not _measuring(run) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.process.pid is not None
        os.killpg(server.process.pid, signal.SIGKILL)  # a crash, not a graceful shutdown
        (row,) = run.wait(timeout=30)
    finally:
        run.stop()
    assert not run.running
    assert row.errors > 0 and row.first_error


def _measuring(run: LoadRun) -> bool:
    """Whether the run has measured at least one window."""
    latest = run.latest()
    return latest is not None and latest.phase == "measuring"


async def test_sync_wrapper_works_inside_a_running_loop(bench_server: RunningServer) -> None:
    """A notebook cell has a running event loop; run_load_sync still returns the rows."""
    (row,) = run_load_sync(LoadSpec("delay", bench_server.grpc_hostport, **FAST))
    assert row.requests > 0 and row.errors == 0


def test_a_never_ending_step_keeps_a_bounded_number_of_windows() -> None:
    """A background load (stable_windows huge) keeps only the newest windows, counting all of them."""
    result = StepResult(kept=MAX_KEPT_WINDOWS)
    for index in range(MAX_KEPT_WINDOWS + 80):
        result.add(Window(1.0, [0.01] * 4, 0, 4, 0.0, None, None) if index else
                   Window(1.0, [9.0], 0, 1, 0.0, None, None))
    assert result.measured == MAX_KEPT_WINDOWS + 80 and len(result.windows) == MAX_KEPT_WINDOWS
    assert all(w.latencies == [0.01] * 4 for w in result.last(10**6))
