"""The poller against one real tritonserver (summaries on, trace file fixed): counts, rates, latency."""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import tritonclient.http as triton_http

from tests.conftest import RunningServer, run_triton
from tests.models import write_echo_model
from tests.sessions.observe.helpers import infer, post, statistics
from tests.waiting import wait_until
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.sessions.live import LiveSource
from triton_ge_console.sessions.observe import metrics
from triton_ge_console.sessions.observe.follow import Follower
from triton_ge_console.sessions.observe.moved_stats import MODELS_PER_CALL, MovedStatistics
from triton_ge_console.sessions.observe.poller import Poller
from triton_ge_console.sessions.observe.rates import ModelCounters
from triton_ge_console.sessions.observe.snapshot import Endpoints, ServerSnapshot
from triton_ge_console.sessions.observe.stats import HttpEndpoint, IndexReader
from triton_ge_console.sessions.observe.trace import TraceCollector, enable_tracing, trace_server_args
from triton_ge_console.sessions.server.registry import SessionRecord

SLOW_DELAY_S = 0.05
MODELS = ("fast", "slow", "broken", "reloaded")


@dataclass
class Served:
    """The module's server and the trace file it writes."""

    server: RunningServer
    trace_file: Path
    client: triton_http.InferenceServerClient

    def endpoints(self) -> Endpoints:
        return Endpoints(self.server.http_url, None, self.server.metrics_url)


@pytest.fixture(scope="module")
def served(triton_dist: TritonDistribution, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server for the module: a fast batching model, a slow one, a failing one, one to reload."""
    root = tmp_path_factory.mktemp("snapshots")
    repository = root / "repository"
    write_echo_model(repository, "fast", batching_delay_us=2000, instances=1)
    write_echo_model(repository, "slow", delay_s=SLOW_DELAY_S, instances=1)
    write_echo_model(repository, "broken", fail=True, instances=1)
    write_echo_model(repository, "reloaded", instances=1)
    write_echo_model(repository, "never_loaded", instances=1)
    install_backend_dir(root / "backends", triton_dist)
    trace_file = root / "session" / "trace.json"
    trace_file.parent.mkdir()
    extra = (*trace_server_args(trace_file), "--metrics-config=summary_latencies=true")
    with run_triton(triton_dist, repository, root / "backends", MODELS, extra) as server:
        client = triton_http.InferenceServerClient(server.http_hostport, concurrency=8)
        try:
            yield Served(server, trace_file, client)
        finally:
            client.close()


@pytest.fixture
def poller(served: Served) -> Iterator[Poller]:
    """A poller on the module's server, closed after the test."""
    poller = Poller("snap", served.endpoints(), started_at=time.time() - 5)
    try:
        yield poller
    finally:
        poller.close()


def test_counts_agree_with_statistics_api(served: Served, poller: Poller) -> None:
    """After a known number of requests the snapshot's totals are Triton's own statistics."""
    before = poller.poll().model("slow")
    assert before is not None
    for _ in range(6):
        infer(served.client, "slow")
    snapshot = poller.poll()
    slow = snapshot.model("slow")
    stats = statistics(served.server.http_url, "slow")
    assert slow is not None and slow.success_total is not None and before.success_total is not None
    assert slow.success_total - before.success_total == 6
    assert slow.success_total == stats["inference_stats"]["success"]["count"]
    assert slow.last_inference == pytest.approx(stats["last_inference"] / 1000.0)
    assert snapshot.live and snapshot.ready and snapshot.version and snapshot.error is None
    assert snapshot.uptime_s is not None and snapshot.uptime_s >= 5
    assert slow.state == "READY" and slow.backend == "python"


def test_rates_batch_and_latency_are_sane(served: Served, poller: Poller) -> None:
    """Concurrent batched requests give rates, an average batch above 1 and latency parts that add up."""
    poller.poll()
    started = time.monotonic()
    futures = [served.client.async_infer("fast", [_batch_input(2)]) for _ in range(24)]
    for future in futures:
        future.get_result()
    fast = poller.poll().model("fast")
    elapsed = time.monotonic() - started
    assert fast is not None and fast.request_rate is not None and fast.inference_rate is not None
    assert fast.request_rate == pytest.approx(24 / elapsed, rel=0.9)
    assert fast.inference_rate == pytest.approx(2 * fast.request_rate)
    assert fast.avg_batch is not None and 2.0 <= fast.avg_batch <= 8.0
    assert fast.execution_rate is not None and fast.execution_rate <= fast.request_rate
    assert fast.latency.avg_ms is not None and fast.queue_ms is not None and fast.compute_ms is not None
    assert fast.queue_ms + fast.compute_ms <= fast.latency.avg_ms * 1.05
    assert fast.queue_depth == 0


def test_summary_quantiles_give_percentiles_near_the_delay(served: Served, poller: Poller) -> None:
    """With summaries on, p50/p99 come from nv_inference_request_summary_us and say so."""
    poller.poll()
    for _ in range(5):
        infer(served.client, "slow")
    latency = poller.poll().model("slow").latency  # type: ignore[union-attr]
    assert latency.source == "summary"
    assert latency.p50_ms is not None and latency.p99_ms is not None and latency.avg_ms is not None
    assert SLOW_DELAY_S * 1000 <= latency.p50_ms <= latency.p99_ms < SLOW_DELAY_S * 1000 * 4


def test_failures_by_reason(served: Served, poller: Poller) -> None:
    """A backend error counts as a failure with Triton's reason label."""
    before = poller.poll().model("broken")
    for _ in range(3):
        with pytest.raises(triton_http.InferenceServerException):
            infer(served.client, "broken")
    broken = poller.poll().model("broken")
    assert before is not None and broken is not None
    assert broken.failure_total is not None and before.failure_total is not None
    assert broken.failure_total - before.failure_total == 3
    assert dict(broken.failures_by_reason).get("BACKEND", 0) >= 3
    assert broken.success_total == 0


def test_plain_fast_parser_agrees_with_prometheus_client(served: Served) -> None:
    """On a real scrape (counters, gauges, summaries) the fast path and the library give the same samples."""
    for _ in range(3):
        infer(served.client, "fast")
    text = urllib.request.urlopen(served.server.metrics_url, timeout=30).read().decode()
    fast, library = metrics._parse_plain(text), metrics._parse_with_library(text)
    assert fast is not None and len(fast) > 50
    assert sorted(map(_sample_key, fast)) == sorted(map(_sample_key, library))  # repr: NaN == NaN


def _sample_key(sample: metrics.MetricSample) -> tuple[str, tuple[tuple[str, str], ...], str, object]:
    """Comparable form: the library names Triton's counters `*_total`, NaN compared by repr."""
    return sample.name.removesuffix("_total"), sample.labels, repr(sample.value), sample.model


def test_unchanged_model_keeps_its_snapshot_object(served: Served, poller: Poller) -> None:
    """A model whose readings did not change keeps the very same snapshot; one with traffic gets a new one."""
    poller.poll()
    before = poller.poll()
    infer(served.client, "fast")
    after = poller.poll()
    assert after.model("never_loaded") is before.model("never_loaded")
    fast_before, fast_after = before.model("fast"), after.model("fast")
    assert fast_before is not None and fast_after is not None and fast_after is not fast_before
    assert fast_after.success_total == (fast_before.success_total or 0) + 1


def test_statistics_only_for_models_whose_counters_moved(served: Served, poller: Poller) -> None:
    """An idle server is asked for no statistics after the first poll; a request to `fast` makes the next
    poll ask about `fast` alone; the figures are those of a poller asking about every model every time."""
    everything = Poller("full", served.endpoints(), moved_statistics=False)
    try:
        poller.poll()
        poller.poll()
        calls = poller.statistics.calls
        poller.poll()
        assert poller.statistics.calls == calls
        infer(served.client, "fast")
        moved = poller.poll()
        assert poller.statistics.calls == calls + 1
        reference = everything.poll()
        for name in ("fast", "slow", "broken", "reloaded"):
            mine, theirs = moved.model(name), reference.model(name)
            assert mine is not None and theirs is not None
            assert (mine.success_total, mine.failure_total, mine.last_inference) == (
                theirs.success_total, theirs.failure_total, theirs.last_inference), name
    finally:
        everything.close()


def test_statistics_in_one_call_once_more_than_one_model_in_twelve_moved(served: Served) -> None:
    """One moved model is asked about alone; two of a handful are cheaper in the call for all."""
    endpoint, moved = HttpEndpoint(served.server.http_url), MovedStatistics()
    try:
        index = IndexReader().read(endpoint)
        ready = sorted((e.name, e.version) for e in index if e.state == "READY")
        assert 2 <= len(ready) < 2 * MODELS_PER_CALL
        counters = {key: ModelCounters() for key in ready}
        moved.read(endpoint, index, dict(counters))  # first read: every model is new, one call for all

        def after_moving(*keys: tuple[str, str]) -> int:
            """Statistics calls of a read after one more request to each of `keys`."""
            for key in keys:
                counters[key] = counters[key]._replace(success=counters[key].success + 1)
            calls = moved.calls
            moved.read(endpoint, index, dict(counters))
            return moved.calls - calls

        assert after_moving(ready[0]) == 1
        assert after_moving() == 0
        assert after_moving(ready[0], ready[1]) == 1  # one call for all, not two
        assert after_moving() == 0
    finally:
        endpoint.close()


def test_unloaded_model_is_listed_unavailable(poller: Poller) -> None:
    """A model in the repository that is not loaded shows with its state and no figures."""
    never = poller.poll().model("never_loaded")
    assert never is not None and never.state != "READY"
    assert never.request_rate is None and never.success_total is None


def test_counter_reset_across_unload_and_load_never_negative(served: Served, poller: Poller) -> None:
    """Unload + load restarts Triton's metrics counters; the next rates count from zero, never negative."""
    for _ in range(5):
        infer(served.client, "reloaded")
    assert poller.poll().model("reloaded").success_total == 5  # type: ignore[union-attr]
    post(served.server.http_url, "/v2/repository/models/reloaded/unload")
    _wait_for_state(poller, "reloaded", "UNAVAILABLE")
    post(served.server.http_url, "/v2/repository/models/reloaded/load")
    infer(served.client, "reloaded")
    after = poller.poll().model("reloaded")
    assert after is not None and after.success_total == 1
    assert after.request_rate is not None and after.request_rate >= 0
    assert (after.inference_rate or 0) >= 0 and (after.execution_rate or 0) >= 0


def test_statistics_reset_by_config_reload_never_negative(served: Served) -> None:
    """Without /metrics the statistics API is the source; a config reload zeroes it: rates stay >= 0."""
    stats_only = Poller("stats-only", Endpoints(served.server.http_url, None, None))
    try:
        for _ in range(4):
            infer(served.client, "reloaded")
        before = stats_only.poll().model("reloaded")
        assert before is not None and before.success_total is not None and before.success_total >= 4
        url = f"{served.server.http_url}/v2/models/reloaded/config"
        config = json.loads(urllib.request.urlopen(url, timeout=30).read())
        config["max_batch_size"] = 4
        post(served.server.http_url, "/v2/repository/models/reloaded/load",
             {"parameters": {"config": json.dumps(config)}})
        infer(served.client, "reloaded")
        after = stats_only.poll().model("reloaded")
    finally:
        stats_only.close()
    assert after is not None and after.success_total == 1
    assert after.request_rate is not None and after.request_rate >= 0 and (after.avg_batch or 1) >= 1


def _wait_for_state(poller: Poller, model: str, state: str, timeout: float = 60.0) -> None:
    """Poll until the model shows `state` in the repository index."""

    def reached() -> bool:
        found = poller.poll().model(model)
        return found is not None and found.state == state

    wait_until(reached, timeout, what=f"{model} reaching {state}")


def test_trace_latency_near_the_controlled_delay(served: Served) -> None:
    """TIMESTAMPS tracing on one model: the trace file gives per-request latency labelled "trace"."""
    http = HttpEndpoint(served.server.http_url)
    try:
        settings = enable_tracing(http, "slow", rate=1, log_frequency=4)
    finally:
        http.close()
    assert settings["trace_level"] == ["TIMESTAMPS"] and settings["trace_file"] == str(served.trace_file)
    for _ in range(8):
        infer(served.client, "slow")
    collector = TraceCollector(served.trace_file)
    deadline = time.monotonic() + 30
    while collector.update() + len(collector.traced_models()) == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    latency = collector.latency("slow", "1")
    assert latency is not None and latency.source == "trace"
    assert latency.p50_ms is not None and SLOW_DELAY_S * 1000 <= latency.p50_ms < SLOW_DELAY_S * 1000 * 4
    assert collector.update() == 0  # files already read are not counted twice


@contextlib.contextmanager
def _following(source: LiveSource, deliver: Callable[[str, ServerSnapshot], object]) -> Iterator[None]:
    """The one poll loop over source, in a thread, until the with-block ends."""
    stop = threading.Event()
    loop = threading.Thread(target=Follower([source], interval_s=0.05).run, args=(deliver, stop))
    loop.start()
    try:
        yield
    finally:
        stop.set()
        loop.join(10)
        source.close()
    assert not loop.is_alive()


def test_the_poll_loop_feeds_a_live_source_history(served: Served) -> None:
    """The one loop (observe/follow.py) polls a live source on an interval into its history until stopped,
    handing each snapshot on in order."""
    source = LiveSource("bg", served.endpoints())
    seen: list[ServerSnapshot] = []
    with _following(source, lambda _name, snapshot: seen.append(snapshot)):
        wait_until(lambda: len(source.history) >= 3, 30, what="three polls")
    times = source.history.times()
    assert all(later > earlier for earlier, later in itertools.pairwise(times))
    assert [s.taken_at for s in seen[: len(times)]] == times[: len(seen)]


def test_a_failing_hand_off_does_not_stop_the_poll_loop(served: Served) -> None:
    """A view whose hand-off raises is logged; the loop keeps polling into the history."""
    source = LiveSource("bg-broken", served.endpoints())

    def broken(_name: str, _snapshot: ServerSnapshot) -> None:
        raise RuntimeError("a view's bug")

    with _following(source, broken):
        wait_until(lambda: len(source.history) >= 3, 30, what="three polls past a broken view")


def test_live_source_polls_and_controls(served: Served) -> None:
    """LiveSource: poll into history, commands through TritonControl, log path passed through."""
    source = LiveSource("live", served.endpoints(), log_path=served.server.log_path)
    try:
        snapshot = source.poll()
        assert snapshot.live and source.history.latest is snapshot
        assert source.log_path == served.server.log_path
        result = source.controller.reload("fast")
        assert result.ok, result.message
    finally:
        source.close()


def test_live_source_from_record_uses_the_session_trace_file(served: Served) -> None:
    """A launched session's record: uptime from its start, traces from <session dir>/trace.json (none taken
    where the server has summaries)."""
    record = SessionRecord(
        name="recorded", pid=None, started_at=time.time() - 60, http_url=served.server.http_url,
        grpc_url=None, metrics_url=served.server.metrics_url, repository=None, spec=None, backend_dir=None,
        log_path=served.server.log_path, token_ref=None, attached=False, session_dir=served.trace_file.parent,
    )
    source = LiveSource.from_record(record, npu_smi=None)
    infer(served.client, "fast")
    try:
        snapshot = source.poll()
        assert source.poller.trace is not None and source.poller.trace.trace_file == served.trace_file
        assert snapshot.live and snapshot.uptime_s is not None and snapshot.uptime_s >= 60
        assert snapshot.session == "recorded" and snapshot.endpoints.metrics_url == served.server.metrics_url
    finally:
        source.close()
    # This server keeps latency summaries: the console leaves tracing off rather than pay for both.
    setting_url = f"{served.server.http_url}/v2/models/fast/trace/setting"
    with urllib.request.urlopen(setting_url, timeout=30) as answer:
        assert json.loads(answer.read())["trace_level"] == ["OFF"]


def _batch_input(batch: int) -> triton_http.InferInput:
    """A [batch, 4] FP32 input."""
    import numpy as np

    tensor = triton_http.InferInput("INPUT0", [batch, 4], "FP32")
    tensor.set_data_from_numpy(np.ones((batch, 4), dtype=np.float32))
    return tensor
