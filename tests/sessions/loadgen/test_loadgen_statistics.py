"""The generator's figures against a model whose latency is known: 20 ms per request, two instances."""

from __future__ import annotations

import pytest

from tests.conftest import RunningServer
from tests.sessions.loadgen.conftest import DELAY_INSTANCES, DELAY_MS
from triton_ge_console.sessions.loadgen.run import BenchRow, LoadSpec, run_load_sync

pytestmark = pytest.mark.timeout(180)

CAPACITY_RPS = DELAY_INSTANCES * 1000 / DELAY_MS  # 100 req/s
FAST = {"window_ms": 400, "warmup_ms": 300, "max_windows": 6}


def assert_littles_law(row: BenchRow, in_flight: float) -> None:
    """Closed loop: throughput x mean latency equals the requests kept in flight."""
    assert row.avg_ms is not None
    assert row.throughput_rps * row.avg_ms / 1000 == pytest.approx(in_flight, rel=0.15)


def test_concurrency_sweep_matches_the_delay_over_grpc(bench_server: RunningServer) -> None:
    """Below capacity latency is the delay and throughput grows with concurrency; above it requests queue."""
    spec = LoadSpec("delay", bench_server.grpc_hostport, "grpc", concurrency=(1, 2, 4), **FAST)
    one, two, four = run_load_sync(spec)

    assert [r.concurrency for r in (one, two, four)] == [1, 2, 4]
    for row in (one, two):
        assert row.p50_ms is not None and DELAY_MS * 0.95 <= row.p50_ms <= DELAY_MS * 2
        assert row.throughput_rps == pytest.approx(row.concurrency * 1000 / DELAY_MS, rel=0.35)
        assert row.errors == 0 and row.requests > 0 and row.first_error is None
        assert row.server_compute_infer_ms == pytest.approx(DELAY_MS, rel=0.3)
        assert_littles_law(row, row.concurrency or 0)
    # Twice the instances' worth of requests: each waits one delay in the queue, throughput is capped.
    assert four.throughput_rps == pytest.approx(CAPACITY_RPS, rel=0.35)
    assert four.p50_ms is not None and four.p50_ms == pytest.approx(2 * DELAY_MS, rel=0.35)
    assert four.server_queue_ms is not None and four.server_queue_ms == pytest.approx(DELAY_MS, rel=0.4)
    assert_littles_law(four, 4)


def test_percentiles_are_ordered_and_server_split_adds_up(bench_server: RunningServer) -> None:
    """p50 <= p90 <= p95 <= p99 <= max, and Triton's compute split sums to server_compute_ms."""
    spec = LoadSpec("delay", bench_server.http_hostport, "http", concurrency=(2,), **FAST)
    (row,) = run_load_sync(spec)

    assert row.protocol == "http"
    assert row.errors == 0 and row.first_error is None  # ending the load is no error
    figures = [row.p50_ms, row.p90_ms, row.p95_ms, row.p99_ms, row.max_ms]
    assert all(f is not None for f in figures)
    assert figures == sorted(figures)  # type: ignore[type-var]
    parts = [row.server_compute_input_ms, row.server_compute_infer_ms, row.server_compute_output_ms]
    assert row.server_compute_ms == pytest.approx(sum(p for p in parts if p is not None))
    assert row.server_queue_ms is not None and row.server_queue_ms < DELAY_MS / 2
    assert row.throughput_rps == pytest.approx(2 * 1000 / DELAY_MS, rel=0.35)
    assert row.client_cpu is not None and 0 < row.client_cpu < 1.5


@pytest.mark.parametrize("distribution", ["constant", "poisson"])
def test_rate_mode_hits_the_target_rate(bench_server: RunningServer, distribution: str) -> None:
    """Open loop below capacity: sends and completions at the asked rate, latency is the delay."""
    spec = LoadSpec("delay", bench_server.grpc_hostport, rate=(40.0,), distribution=distribution,
                    window_ms=1000, warmup_ms=300, max_windows=4)
    (row,) = run_load_sync(spec)

    assert row.rate == 40.0 and row.concurrency is None
    tolerance = 0.1 if distribution == "constant" else 0.3
    assert row.send_rate_rps == pytest.approx(40.0, rel=tolerance)
    assert row.throughput_rps == pytest.approx(40.0, rel=tolerance)
    assert row.p50_ms is not None and DELAY_MS * 0.95 <= row.p50_ms <= DELAY_MS * 2


def test_overload_shows_in_latency_instead_of_being_hidden(bench_server: RunningServer) -> None:
    """Twice the capacity: the generator keeps sending on schedule and latency counts the backlog."""
    spec = LoadSpec("delay", bench_server.grpc_hostport, rate=(2 * CAPACITY_RPS,), window_ms=400,
                    warmup_ms=200, max_windows=3)
    (row,) = run_load_sync(spec)

    # a generator that waited for answers would send at the server's pace (capacity); this one keeps its
    # schedule, up to what two busy cores let a Python client send (159 of 200/s seen in a full run)
    assert 1.4 * CAPACITY_RPS <= row.send_rate_rps <= 2.2 * CAPACITY_RPS
    assert row.throughput_rps <= CAPACITY_RPS * 1.15
    assert row.p99_ms is not None and row.p99_ms > 5 * DELAY_MS
    assert row.server_queue_ms is not None and row.server_queue_ms > 2 * DELAY_MS
