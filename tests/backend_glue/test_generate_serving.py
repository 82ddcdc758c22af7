"""A generate model built from a spec, served by a real tritonserver: greedy streams over gRPC and HTTP
generate_stream equal the direct decode loop token for token; refusals are clear; a closed stream's KV
cache is freed while others go on; the token-level metrics appear in /metrics."""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.backend_glue.conftest import FAKES, server_env
from tests.backend_glue.metrics import executions, metric_samples, model_value
from tests.conftest import RunningServer, run_triton
from tests.models import (
    LLAMA_GENERATE,
    bf16_kv_decoder,
    build_spec,
    direct_decoder,
    failing_decoder_model,
    write_fake_om,
)
from tests.waiting import wait_until
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.generate_batch import kv_layout
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.backend_glue.onnx_executor import OnnxRuntimeExecutor
from triton_ge_console.cli import main
from triton_ge_console.repository.demo_decoder import DEMO_LAYOUT, direct_greedy
from triton_ge_console.repository.demo_models import demo_bytes
from triton_ge_console.sessions.lifecycle import attach
from triton_ge_console.sessions.loadgen.generate_client import (
    Generation,
    GrpcStreamer,
    StreamResult,
    http_body,
    http_generate,
)
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry, grpc_token_header
from triton_ge_console.sessions.server.token_header import TOKEN_HEADER

SPEC = "models:" + LLAMA_GENERATE + """  - name: llama_long
    backend: ge
    source: demo:llama_kv
    generate: {max_tokens: 8000, kv_cache_mib: 2048}
  - name: llama_pair
    backend: ge
    source: demo:llama_kv
    instance_group: {count: 2}
    generate: {max_tokens: 16, max_running: 2, kv_cache_mib: 1}
  - name: decoder_failing
    backend: ge
    source: failing_decoder.onnx
    generate: {max_tokens: 8, kv_cache_mib: 1}
  - name: decoder_bf16
    backend: ge
    source: bf16_decoder.onnx
    generate: {max_tokens: 24, max_running: 4, kv_cache_mib: 1}
"""
LONG = 8000  # llama_long's longest stream: the demo's context is 8192 tokens (prompt + max_tokens)
MODELS = ("llama_generate", "llama_long", "llama_pair", "decoder_failing", "decoder_bf16")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory,
           triton_dist: TritonDistribution) -> Iterator[RunningServer]:
    """Both generate models, built from the spec by the real builder."""
    root = tmp_path_factory.mktemp("generate")
    (root / "failing_decoder.onnx").write_bytes(failing_decoder_model())
    (root / "bf16_decoder.onnx").write_bytes(bf16_kv_decoder())
    build_spec(root, SPEC)
    install_backend_dir(root / "backends", triton_dist)
    source = str(Path(__file__).resolve().parents[2] / "src")
    with (server_env(PYTHONPATH=source, GE_GLUE_RUN_DIR=str(root / "run")),
          run_triton(triton_dist, root / "repo", root / "backends", models=MODELS) as running):
        yield running


@pytest.fixture(scope="module")
def direct() -> Callable[[Sequence[int], int], list[int]]:
    """The reference: the direct greedy loop over the same ONNX in-process."""
    return direct_decoder()


def _prompt(length: int, seed: int) -> tuple[int, ...]:
    return tuple(int(t) for t in np.random.default_rng(seed).integers(0, 32000, length))


def _grpc(server: RunningServer, generation: Generation, model: str = "llama_generate") -> list[int]:
    streamer = GrpcStreamer(server.grpc_hostport, model)
    try:
        result = streamer.generate(generation)
    finally:
        streamer.close()
    assert result.error is None, result.error
    return result.tokens


def test_concurrent_grpc_streams_equal_the_direct_loop(server: RunningServer, direct: object) -> None:
    """Four streams at once (different prompt lengths), one token per response, each equal to the
    direct greedy loop over the same ONNX, token for token."""
    cases = [(_prompt(n, seed), tokens) for n, seed, tokens in ((3, 1, 40), (11, 2, 17), (1, 3, 48),
                                                                (29, 4, 5))]
    results: dict[int, list[int]] = {}

    def one(index: int) -> None:
        prompt, tokens = cases[index]
        results[index] = _grpc(server, Generation(prompt, tokens))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(cases))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for index, (prompt, tokens) in enumerate(cases):
        assert results[index] == direct(list(prompt), tokens)  # type: ignore[operator]


def test_http_generate_stream_equals_the_direct_loop(server: RunningServer, direct: object) -> None:
    """Triton's HTTP generate_stream carries the same tokens, one event each."""
    prompt = _prompt(7, 9)
    result = http_generate("127.0.0.1", server.ports.http, "llama_generate", Generation(prompt, 12))
    assert result.error is None, result.error
    assert result.tokens == direct(list(prompt), 12)  # type: ignore[operator]
    assert len(result.arrivals) == 12


def test_a_bf16_cache_decoder_streams_the_direct_loops_tokens(server: RunningServer, tmp_path: Path) -> None:
    """A decoder whose cache and logits are BF16 serves concurrent streams equal, token for token, to the
    direct greedy loop over the same ONNX in-process, and its KV accounting counts 2 bytes an element
    (512 bytes a token, where FP32 takes 1,024)."""
    path = tmp_path / "bf16_decoder.onnx"
    path.write_bytes(bf16_kv_decoder())
    executor = OnnxRuntimeExecutor(path, intra_op_threads=1)
    try:
        layout = kv_layout(executor.inputs, executor.outputs)
        cases = [(_prompt(n, seed), tokens) for n, seed, tokens in ((6, 1, 24), (13, 2, 9), (1, 3, 17))]
        expected = [direct_greedy(executor.run_fresh, layout, list(p), t) for p, t in cases]
    finally:
        executor.close()
    results: dict[int, list[int]] = {}
    threads = [threading.Thread(target=lambda i=i: results.update(
        {i: _grpc(server, Generation(*cases[i]), "decoder_bf16")})) for i in range(len(cases))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [results.get(i) for i in range(len(cases))] == expected
    streamer = GrpcStreamer(server.grpc_hostport, "decoder_bf16")
    try:
        too_big = streamer.generate(Generation(_prompt(2100, 0), 8))
    finally:
        streamer.close()
    assert "(2100 prompt + 8 output tokens x 512 bytes)" in str(too_big.error)


def test_seeded_sampling_repeats(server: RunningServer) -> None:
    """Temperature sampling with a seed gives the same stream twice."""
    generation = Generation(_prompt(5, 3), 10, temperature=0.8, top_k=50, top_p=0.9, seed=42)
    stream = _grpc(server, generation)
    assert _grpc(server, generation) == stream
    assert _grpc(server, dataclasses.replace(generation, seed=43)) != stream  # the seed reaches the sampler
    assert _grpc(server, dataclasses.replace(generation, temperature=None, top_k=None, top_p=None,
                                             seed=None)) != stream  # sampled, not greedy


def test_refusals_are_one_clear_error(server: RunningServer) -> None:
    """More tokens than the spec allows, more KV than the instance has, a bad top_p: each one error."""
    streamer = GrpcStreamer(server.grpc_hostport, "llama_generate")
    try:
        too_long = streamer.generate(Generation((1, 2), 49))
        too_big = streamer.generate(Generation(_prompt(1100, 0), 8))
        bad_top_p = streamer.generate(Generation((1,), 4, temperature=1.0, top_p=0.0))
        negative = streamer.generate(Generation((5, -1), 4))  # ORT's Gather would read it as 31999
        past_vocab = streamer.generate(Generation((32000,), 4))
    finally:
        streamer.close()
    assert "token id -1 is outside the vocabulary (0 to 31999)" in str(negative.error)
    assert "token id 32000 is outside the vocabulary" in str(past_vocab.error)
    assert "max_tokens 49: expected 1 to 48" in str(too_long.error)
    assert "can never fit" in str(too_big.error) and "kv_cache_mib" in str(too_big.error)
    assert "top_p 0.0" in str(bad_top_p.error)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_numbers_arrive_as_sent_or_are_refused_naming_the_field(server: RunningServer, protocol: str) -> None:
    """Over HTTP JSON Triton casts a number to the input's declared type without a range check (its
    src/http_server.cc, ReadDataFromJsonHelper): declared INT32, max_tokens 4294967301 arrived as 5 and
    streamed 5 tokens, 2**31 as -2147483648, top_k 2**32 + 1 as 1 (greedy). Declared INT64 they arrive as
    sent, and the glue's range check names the field."""
    host, port = server.http_hostport.split(":")

    def run(generation: Generation) -> tuple[list[int], str | None]:
        if protocol == "http":
            result = http_generate(host, int(port), "llama_generate", generation)
        else:
            streamer = GrpcStreamer(server.grpc_hostport, "llama_generate")
            try:
                result = streamer.generate(generation)
            finally:
                streamer.close()
        return result.tokens, result.error

    for asked in (2**32 + 5, 2**31):
        tokens, error = run(Generation((1, 2), asked))
        assert tokens == [] and f"max_tokens {asked}: expected 1 to 48" in str(error), (tokens, error)
    sampled = Generation(_prompt(5, 3), 10, temperature=0.8, top_k=0, seed=7)
    every_token, error = run(sampled)
    assert error is None and len(every_token) == 10
    assert run(dataclasses.replace(sampled, top_k=2**32 + 1)) == (every_token, None)  # more than the vocab
    assert run(dataclasses.replace(sampled, top_k=1))[0] != every_token  # so a wrapped top_k would show


def _kv_bytes(server: RunningServer) -> float:
    return model_value(server, "ge_generate_kv_cache_bytes", "llama_long")


def test_a_closed_stream_frees_its_kv_cache_while_another_goes_on(server: RunningServer) -> None:
    """Two long streams; the first client closes its stream (cancelling): its KV reservation is freed
    and counted as ended by cancel while the second still streams; closing that one frees the rest."""
    per_sequence = (4 + LONG) * DEMO_LAYOUT.bytes_per_token
    streamers = [GrpcStreamer(server.grpc_hostport, "llama_long") for _ in range(2)]
    for index, streamer in enumerate(streamers):
        streamer.send(Generation(_prompt(4, index), LONG))
    wait_until(lambda: _kv_bytes(server) == 2 * per_sequence, timeout=60)
    streamers[0].close(cancel=True)
    wait_until(lambda: _kv_bytes(server) == per_sequence, timeout=30)
    assert model_value(server, "ge_generate_sequences_ended_total", "llama_long", reason="cancel") == 1
    def generated() -> float:
        return model_value(server, "ge_generate_generation_tokens_total", "llama_long")

    before = generated()
    wait_until(lambda: generated() > before + 50)  # the other stream goes on
    assert model_value(server, "ge_generate_running_sequences", "llama_long") == 1
    streamers[1].close(cancel=True)
    wait_until(lambda: _kv_bytes(server) == 0, timeout=30)
    assert model_value(server, "ge_generate_sequences_ended_total", "llama_long", reason="cancel") == 2


def test_closing_without_cancel_lets_a_sent_generation_finish(server: RunningServer, direct: object) -> None:
    """close() (no cancel) waits for a generation sent with send() and still streaming: it runs to its final
    response, its tokens in the result send() returned, then its KV reservation is freed, ended by length,
    not cancelled. (close(cancel=True) is test_a_closed_stream_frees_its_kv_cache_while_another_goes_on.)
    Seen failing first: close() read the stream into a result of its own, leaving send()'s empty."""
    def ended(reason: str) -> float:
        return model_value(server, "ge_generate_sequences_ended_total", "llama_long", reason=reason)

    before = (ended("length"), ended("cancel"))
    prompt, tokens = _prompt(4, 13), 3000
    streamer = GrpcStreamer(server.grpc_hostport, "llama_long")
    try:
        result = streamer.send(Generation(prompt, tokens))
        wait_until(lambda: _kv_bytes(server) == (4 + tokens) * DEMO_LAYOUT.bytes_per_token, timeout=60)
    finally:
        streamer.close()  # what is tested: it returns once the generation has ended
    assert result.error is None, result.error
    assert result.tokens == direct(list(prompt), tokens)  # type: ignore[operator]
    assert len(result.arrivals) == tokens
    wait_until(lambda: _kv_bytes(server) == 0, timeout=30)
    wait_until(lambda: (ended("length"), ended("cancel")) == (before[0] + 1, before[1]), timeout=10)


def test_token_metrics_reach_triton_metrics(server: RunningServer) -> None:
    """After streams ended by length: TTFT and ITL histograms, token counters, endings and KV capacity."""
    _grpc(server, Generation(_prompt(6, 5), 9))
    model = "llama_generate"

    def count(family: str) -> float:
        return sum(s.value for s in metric_samples(server, family)
                   if s.name.endswith("_count") and s.labels.get("model") == model)

    def figures() -> tuple[float, ...]:
        return (model_value(server, "ge_generate_running_sequences", model),
                model_value(server, "ge_generate_sequences_ended_total", model, reason="length"),
                count("ge_generate_time_to_first_token_seconds"),
                count("ge_generate_inter_token_latency_seconds"),
                model_value(server, "ge_generate_generation_tokens_total", model))

    def settled() -> bool:  # every figure flushed: one first token per sequence, one ITL per other token
        running, ended, ttft, itl, generated = figures()
        return running == 0 and ended == ttft >= 1 and generated == ttft + itl
    wait_until(settled, timeout=30)
    assert model_value(server, "ge_generate_prompt_tokens_total", model) >= 6
    assert model_value(server, "ge_generate_kv_cache_capacity_bytes", model) == 1 << 20
    assert model_value(server, "ge_executions_total", model) >= figures()[1]  # the glue's own counters too


def test_status_json_shows_the_token_figures(server: RunningServer, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """An attached session's `status --json` carries each generate model's figures (None for others)."""
    _grpc(server, Generation(_prompt(8, 6), 20))
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    attach(server.http_url, "gen", Registry(), metrics_url=server.metrics_url)

    def figures() -> dict[str, object]:
        assert main(["status", "--json"]) == 0
        models = {m["name"]: m for m in json.loads(capsys.readouterr().out)["models"]}
        return models["llama_generate"]["generation"]  # type: ignore[no-any-return]

    def settled() -> bool:  # the generation's figures handed to Triton (running reads 0 before as after)
        shown = figures()
        return shown["running"] == 0 and (shown["generated_tokens_total"] or 0) >= 20  # type: ignore[operator]

    wait_until(settled, timeout=30)
    shown = figures()
    assert shown["ttft_p50_ms"] is not None and shown["ttft_p99_ms"] >= shown["ttft_p50_ms"] > 0
    assert shown["itl_p50_ms"] is not None and shown["itl_p99_ms"] >= shown["itl_p50_ms"] > 0
    assert shown["generated_tokens_total"] >= 20 and shown["prompt_tokens_total"] >= 8
    assert shown["kv_cache_capacity_bytes"] == 1 << 20 and shown["kv_cache_share"] == 0.0
    assert dict(shown["ended_by_reason"])["length"] >= 1  # type: ignore[call-overload]


def test_status_of_a_model_generating_reads_its_percentiles_over_a_window(
        server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 39: `status` read TTFT p99 4,375 ms since load during a run whose p99 was 422 ms. While a
    generate model has sequences running it polls again a second later, and its percentiles are those of
    that second, labelled so: the stream's token intervals, no first token in it."""
    from triton_ge_console.display import generation_line

    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    attach(server.http_url, "gen", Registry(), metrics_url=server.metrics_url)
    streamer = GrpcStreamer(server.grpc_hostport, "llama_long")
    try:
        streamer.send(Generation(_prompt(4, 54), LONG))
        wait_until(lambda: model_value(server, "ge_generate_running_sequences", "llama_long") > 0, timeout=30)
        assert main(["status", "--json"]) == 0
        models = {m["name"]: m for m in json.loads(capsys.readouterr().out)["models"]}
    finally:
        streamer.close(cancel=True)
    shown = models["llama_long"]["generation"]
    assert shown["window_s"] is not None and 0.5 <= shown["window_s"] < 5, shown
    assert shown["itl_p50_ms"] is not None and shown["ttft_p50_ms"] is None
    assert f"(last {shown['window_s']:.0f} s)" in generation_line(shown)


def test_the_pollers_percentiles_cover_its_recent_polls_labelled_so(server: RunningServer) -> None:
    """Issue 39: TTFT/ITL in the console and notebooks were percentiles since load, shown as now. Their
    poller reads a generate model's percentiles over what its histograms gained in the last polls' window:
    a first poll is since load (labelled so), a second with nothing generated between reads — over its
    window, and one generation later reads it."""
    from triton_ge_console.display import generation_line
    from triton_ge_console.sessions.observe.generation import GenerationFigures, generation_row
    from triton_ge_console.sessions.observe.poller import Poller
    from triton_ge_console.sessions.observe.snapshot import Endpoints

    model = "decoder_bf16"  # only earlier tests' finished generations: nothing left to flush after ours

    def generate(seed: int) -> None:  # one generation, its figures (and any before them) handed to Triton
        def ended() -> float:
            return model_value(server, "ge_generate_e2e_request_latency_seconds_count", model)

        before = ended()
        _grpc(server, Generation(_prompt(4, seed), 3), model)
        wait_until(lambda: ended() > before, timeout=10)

    poller = Poller("gen", Endpoints(server.http_url, None, server.metrics_url), sample_traces=False)

    def figures() -> GenerationFigures:
        (found,) = [m.generation for m in poller.poll().models if m.name == model]
        assert found is not None
        return found

    try:
        generate(52)
        first, quiet = figures(), figures()
        generate(53)
        later = figures()
    finally:
        poller.close()
    assert first.window_s is None and first.ttft_p50_ms is not None and first.itl_p50_ms is not None
    assert "ms (since load)" in generation_line(generation_row(first) or {})
    assert quiet.window_s is not None and quiet.window_s > 0
    assert (quiet.ttft_p50_ms, quiet.itl_p50_ms, quiet.e2e_p50_ms) == (None, None, None)
    assert later.window_s is not None and later.window_s > quiet.window_s
    assert later.ttft_p50_ms is not None and later.itl_p50_ms is not None and later.e2e_p50_ms is not None
    assert f"ms (last {later.window_s:.0f} s)" in generation_line(generation_row(later) or {})


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_bench_generate_reports_token_figures(server: RunningServer, protocol: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`bench --generate` streams over each protocol: every generation counted with its tokens, and
    goodput all of it under a loose SLO, none of it under an impossible one; a run compared with an
    earlier one gives each step's ratios."""
    url = server.grpc_hostport if protocol == "grpc" else server.http_hostport
    common = ["bench", "llama_generate", "--generate", "--url", url, "--protocol", protocol, "--quiet",
              "--concurrency", "1,2", "--prompt-tokens", "8", "--output-tokens", "6", "--requests", "4",
              "--json", "-"]
    assert main([*common, "--slo", "ttft=60000,itl=60000"]) == 0
    loose = json.loads(capsys.readouterr().out)
    assert [r["concurrency"] for r in loose["rows"]] == [1, 2]
    for row in loose["rows"]:
        assert (row["requests"], row["errors"], row["output_tokens"]) == (4, 0, 24)
        assert row["goodput_per_s"] == row["requests_per_s"] > 0 and row["goodput_share"] == 1.0
        assert row["ttft_ms"]["p50"] > 0 and row["itl_ms"]["p99"] >= row["itl_ms"]["p50"] > 0
        assert row["e2e_ms"]["p50"] >= row["ttft_ms"]["p50"]
        assert row["output_tokens_per_s"] == pytest.approx(24 / row["duration_s"])
    (tmp_path / "loose.json").write_text(json.dumps(loose), encoding="utf-8")
    assert main([*common, "--slo", "ttft=0.000001", "--compare", str(tmp_path / "loose.json")]) == 0
    strict = json.loads(capsys.readouterr().out)
    assert all(row["goodput_per_s"] == 0 and row["goodput_share"] == 0 for row in strict["rows"])
    assert [c["concurrency"] for c in strict["compared"]] == [1, 2]
    assert all(c["rate"] is None for c in strict["compared"])
    assert all(c["output_tokens_per_s"] > 0 and c["itl_p50_ms"] > 0 for c in strict["compared"])


def test_the_load_panels_timed_run_streams_for_its_duration(server: RunningServer) -> None:
    """The notebooks' generate runner (the console's engine too): streams for the duration given, each
    generation complete, with its token figures (and the figures so far while it measures)."""
    from triton_ge_console.sessions.loadgen.generate_bench import run_timed, timed_load
    from triton_ge_console.widgets.loadtest import generate_runner

    fields = generate_runner(server.grpc_hostport, output_tokens=6)("llama_generate", 2, 1.5)
    assert fields["requests"] > 0 and fields["errors"] == 0
    assert fields["output_tokens"] == 6 * fields["requests"]
    assert fields["ttft_p50_ms"] > 0 and fields["itl_p99_ms"] >= fields["itl_p50_ms"] > 0
    assert 1.0 < fields["duration_s"] < 30  # ended by its duration, not by a count of generations
    so_far: list[int] = []
    row = run_timed(timed_load("llama_generate", server.grpc_hostport, 2, output_tokens=6), 2.0,
                    threading.Event(), lambda r: so_far.append(r.requests), every_s=0.5)
    assert so_far and so_far == sorted(so_far) and so_far[-1] <= row.requests


def test_bench_generate_refuses_bad_options(server: RunningServer, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A bad --slo or --compare file is a usage error (exit 2) in one line; a failing model exit 1."""
    base = ["bench", "llama_generate", "--generate", "--url", server.grpc_hostport, "--quiet"]
    assert main([*base, "--slo", "ttft=fast"]) == 2
    assert "'fast' is not a number of milliseconds" in capsys.readouterr().err
    (tmp_path / "other.json").write_text('{"rows": []}', encoding="utf-8")
    assert main([*base, "--compare", str(tmp_path / "other.json")]) == 2
    assert "not the JSON of `ge-console bench --generate --json`" in capsys.readouterr().err
    assert main([*base, "--output-tokens", "49", "--requests", "1"]) == 1
    assert "max_tokens 49" in capsys.readouterr().err


def test_a_disconnected_http_stream_frees_its_kv_cache(server: RunningServer) -> None:
    """A generate_stream client that goes away mid-stream (its socket closed): Triton cancels the request
    and the glue frees its KV reservation at its next step, counted as ended by cancel."""
    cancelled = model_value(server, "ge_generate_sequences_ended_total", "llama_long", reason="cancel")
    connection = http.client.HTTPConnection("127.0.0.1", server.ports.http, timeout=30)
    connection.request("POST", "/v2/models/llama_long/generate_stream",
                       body=http_body(Generation(_prompt(4, 7), LONG)),
                       headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.readline().startswith(b"data:")
    wait_until(lambda: _kv_bytes(server) > 0, timeout=30)
    connection.sock.shutdown(socket.SHUT_RDWR)  # type: ignore[union-attr]
    connection.close()
    wait_until(lambda: _kv_bytes(server) == 0, timeout=30)
    assert model_value(server, "ge_generate_sequences_ended_total", "llama_long",
                       reason="cancel") == cancelled + 1


def test_on_an_npu_a_generate_model_refuses_to_load_saying_what_is_not_supported(
        tmp_path: Path, triton_dist: TritonDistribution) -> None:
    """With CANN's acl importable (the fake) and an OM beside it, execution_mode npu is refused at load:
    the message says generation runs in CPU emulation only for now and how to ask for it."""
    build_spec(tmp_path, """
        models:
          - name: npu_generate
            backend: ge
            source: demo:llama_kv
            generate: true
            parameters: {execution_mode: npu}
        """)
    write_fake_om(tmp_path / "repo" / "npu_generate" / "1", demo_bytes("demo:llama_kv"))
    install_backend_dir(tmp_path / "backends", triton_dist)
    source = str(Path(__file__).resolve().parents[2] / "src")
    with (server_env(PYTHONPATH=os.pathsep.join([str(FAKES), source]), GE_GLUE_RUN_DIR=str(tmp_path / "run")),
          run_triton(triton_dist, tmp_path / "repo", tmp_path / "backends") as running,
          httpclient.InferenceServerClient(running.http_hostport) as client,
          pytest.raises(InferenceServerException) as refused):
        client.load_model("npu_generate")
    assert "generation runs in CPU emulation only for now" in str(refused.value)
    assert "set parameters.execution_mode cpu" in str(refused.value)


def test_two_instances_each_batch_their_own_sequences(server: RunningServer, direct: object) -> None:
    """Two instances of one generate model: six streams at once spread over both, each equal to the
    direct loop; each instance reports its own occupancy and capacity."""
    cases = [(_prompt(3 + i, 40 + i), 16) for i in range(6)]
    results: dict[int, list[int]] = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(
        i, _grpc(server, Generation(*cases[i]), "llama_pair"))) for i in range(len(cases))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [results[i] for i in range(len(cases))] == [direct(list(p), n) for p, n in cases]  # type: ignore[operator]
    instances = {s.labels["instance"] for s in metric_samples(server, "ge_generate_kv_cache_capacity_bytes")
                 if s.labels.get("model") == "llama_pair"}
    assert len(instances) == 2
    assert model_value(server, "ge_generate_kv_cache_capacity_bytes", "llama_pair") == 2 << 20


def test_bench_generate_rate_sweep(server: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    """--rate: arrivals at a rate (Poisson here), however many are in flight; each step says its rate
    and the most in flight, and counts every generation; lengths drawn from ranges, the same each run."""
    command = ["bench", "llama_generate", "--generate", "--url", server.grpc_hostport, "--quiet",
               "--rate", "50,200", "--distribution", "poisson", "--prompt-tokens", "2:9",
               "--output-tokens", "3:7", "--requests", "6", "--json", "-"]
    assert main(command) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["context"]["arguments"]["output_tokens"] == [3, 7]
    rows = first["rows"]
    assert [row["rate"] for row in rows] == [50.0, 200.0]
    for row in rows:
        assert (row["requests"], row["errors"]) == (6, 0) and 18 <= row["output_tokens"] <= 42
        assert 1 <= row["concurrency"] <= 6 and row["ttft_ms"]["p50"] > 0
    assert main(command) == 0
    again = json.loads(capsys.readouterr().out)["rows"]
    assert [row["output_tokens"] for row in again] == [row["output_tokens"] for row in rows]


def test_generations_failing_mid_stream_count_as_failed_requests(server: RunningServer) -> None:
    """A decode step that fails answers the stream with the error after its first token. Triton counted
    the request a success when execute returned (python_backend r24.06 on), so the glue counts it in
    ge_request_failures_total as it does a refusal, or a model failing every generation would read
    healthy; a cancelled stream is not a failure."""
    def failures(model: str) -> tuple[float, int]:  # the glue's count, and Triton's own
        url = f"http://127.0.0.1:{server.ports.http}/v2/models/{model}/stats"
        with urllib.request.urlopen(url, timeout=5) as response:
            triton = json.load(response)["model_stats"][0]["inference_stats"]["fail"]["count"]
        return model_value(server, "ge_request_failures_total", model), triton

    streamer = GrpcStreamer(server.grpc_hostport, "decoder_failing")
    try:
        result = streamer.generate(Generation((1, 2, 3), 8))
    finally:
        streamer.close()
    assert result.tokens == [100] and "decode step failed" in str(result.error)
    wait_until(lambda: failures("decoder_failing") == (1, 0), timeout=10)
    wait_until(lambda: model_value(server, "ge_generate_sequences_ended_total", "decoder_failing",
                                   reason="error") == 1, timeout=10)
    before = failures("llama_long")
    streamer = GrpcStreamer(server.grpc_hostport, "llama_long")
    streamer.send(Generation(_prompt(4, 8), LONG))
    wait_until(lambda: _kv_bytes(server) > 0, timeout=30)
    streamer.close(cancel=True)
    wait_until(lambda: _kv_bytes(server) == 0, timeout=30)
    assert failures("llama_long") == before


def test_a_generation_past_its_timeout_ends_as_that_error_and_is_cancelled(server: RunningServer) -> None:
    """A stream still going at the streamer's timeout ends with the tokens so far and that error, and its
    request is cancelled with it (the call's deadline): its KV cache is freed while the streamer is open."""
    streamer = GrpcStreamer(server.grpc_hostport, "llama_long", timeout=2.0)
    try:
        result = streamer.generate(Generation(_prompt(4, 12), LONG))
        assert result.error == "no final response within 2 s" and result.tokens
        wait_until(lambda: _kv_bytes(server) == 0, timeout=30)
    finally:
        streamer.close()


def test_a_grpc_stream_carries_its_headers(triton_dist: TritonDistribution, tmp_path: Path) -> None:
    """A server whose gRPC inference wants a token: a stream given the token's header streams, one without
    it has Triton's refusal as its error (the session's token reaches bench --generate's calls so)."""
    build_spec(tmp_path, "models:" + LLAMA_GENERATE)
    install_backend_dir(tmp_path / "backends", triton_dist)
    source = str(Path(__file__).resolve().parents[2] / "src")
    restricted = (f"--grpc-restricted-protocol=inference:{TOKEN_HEADER}=s3cret",)
    with (server_env(PYTHONPATH=source, GE_GLUE_RUN_DIR=str(tmp_path / "run")),
          run_triton(triton_dist, tmp_path / "repo", tmp_path / "backends", models=("llama_generate",),
                     extra=restricted) as running):
        results = []
        for headers in ({grpc_token_header(): "s3cret"}, {}):
            streamer = GrpcStreamer(running.grpc_hostport, "llama_generate", headers=headers)
            try:
                results.append(streamer.generate(Generation((1, 2, 3), 4)))
            finally:
                streamer.close()
    assert results[0].error is None and len(results[0].tokens) == 4
    assert not results[1].tokens
    assert f"This protocol is restricted, expecting header '{grpc_token_header()}'" in str(results[1].error)


def _memory_kib(pid: int, field: str) -> int:
    """A /proc/PID/status figure (VmRSS: now, VmHWM: the peak) in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for process {pid}")


def test_a_short_request_is_not_held_behind_a_long_prefill_whose_memory_is_bounded(
        server: RunningServer, direct: Callable[[Sequence[int], int], list[int]]) -> None:
    """Issue 39, reproduced: a 6,000-token prompt was prefilled in one run on execute's thread, so a 3-token
    request sent during it had its first token only after the whole prefill, and the model's process grew
    1.8 GB (attention over prompt x prompt). Sent once the long request's execute returned, the short
    request's first token now comes before the long one's, both streams still equal the direct loop, and
    the stub's peak memory grows far less than a GiB and is given back (chunked, ORT's arena still kept
    the prefill's 143 MiB for good)."""
    from triton_ge_console.sessions.loadgen.pinning import stub_pids

    (stub,) = stub_pids("llama_long", server.process.pid)
    _stream(server, Generation(_prompt(3, 40), 3))  # a warm model: what its runs always hold is held
    peak_before, held_before = _memory_kib(stub, "VmHWM"), _memory_kib(stub, "VmRSS")
    long_prompt, short_prompt = _prompt(6000, 41), _prompt(3, 42)
    executed = executions(server, "llama_long")
    results: dict[str, object] = {}
    thread = threading.Thread(target=lambda: results.update(long=_stream(server, Generation(long_prompt, 2))))
    thread.start()
    try:
        wait_until(lambda: executions(server, "llama_long") > executed, timeout=60, interval=0.005)
        short = _stream(server, Generation(short_prompt, 3))
    finally:
        thread.join(timeout=120)
    long = results["long"]
    assert isinstance(long, StreamResult)
    assert long.error is None and short.error is None, (long.error, short.error)
    assert short.arrivals[0] < long.arrivals[0]
    assert short.tokens == direct(short_prompt, 3) and long.tokens == direct(long_prompt, 2)
    assert _memory_kib(stub, "VmHWM") - peak_before < 512 * 1024
    wait_until(lambda: _memory_kib(stub, "VmRSS") - held_before < 64 * 1024, timeout=10,
               what="the stub giving back what the long prompt's prefill took")


def _stream(server: RunningServer, generation: Generation) -> StreamResult:
    """One generation on llama_long over a channel of its own, read as it arrives."""
    streamer = GrpcStreamer(server.grpc_hostport, "llama_long")
    try:
        return streamer.generate(generation)
    finally:
        streamer.close()


def test_a_request_beyond_the_models_context_is_refused_with_the_numbers(server: RunningServer) -> None:
    """Issue 39: nothing bounded a request's context. The demo llama's export declares 8,192 tokens
    (max_position_embeddings): prompt + max_tokens beyond it is refused at once, the numbers named."""
    streamer = GrpcStreamer(server.grpc_hostport, "llama_long")
    try:
        result = streamer.generate(Generation(_prompt(8000, 43), 500))
    finally:
        streamer.close()
    assert result.tokens == []
    assert ("8000 prompt + 500 max_tokens = 8500 tokens, more than the model's context of 8192 "
            "(generate.max_model_len)") in str(result.error)


def test_text_to_a_model_without_a_tokenizer_says_it_has_none(server: RunningServer) -> None:
    """Issue 39: text_input to a model without a tokenizer said "input_ids is required", and beside
    input_ids the text was dropped silently (Triton passed it as a parameter). Both now say there is no
    tokenizer."""
    errors = []
    for body in ({"text_input": "the cache grows", "max_tokens": 4},
                 {"input_ids": [1, 2, 3], "text_input": "the cache grows", "max_tokens": 4}):
        connection = http.client.HTTPConnection("127.0.0.1", server.ports.http, timeout=60)
        try:
            connection.request("POST", "/v2/models/llama_generate/generate", body=json.dumps(body).encode(),
                               headers={"Content-Type": "application/json"})
            errors.append(json.loads(connection.getresponse().read()).get("error"))
        finally:
            connection.close()
    for error in errors:
        assert "text_input: this model has no tokenizer (spec generate.tokenizer), so it takes the prompt " \
               "as input_ids only" in str(error)


def test_the_consoles_test_request_streams_ids_from_a_model_without_a_tokenizer(
        server: RunningServer, direct: Callable[[Sequence[int], int], list[int]]) -> None:
    """Issue 39: the console's `t` on a generate model said "[501] HTTP end point doesn't support models
    with decoupled transaction policy". Without a tokenizer its test request streams the test prompt's ids
    and its line shows the ids that came, the direct loop's."""
    from triton_ge_console.sessions.act.probe import TEST_IDS, TEST_TOKENS, send_test_request

    probe = send_test_request(server.http_url, "llama_generate")
    assert probe.ok, probe.message
    assert probe.message.startswith(f"llama_generate streamed {TEST_TOKENS} tokens in ")
    assert probe.message.endswith(f"): ids {direct(TEST_IDS, TEST_TOKENS)}") and probe.latency_ms is not None


def test_a_refused_request_is_counted_rejected_not_as_a_failing_model(server: RunningServer) -> None:
    """Issue 39: refusals (the client's mistakes) counted as the model's failures (ge_request_failures_total:
    'FAIL 37' in the console) and as sequences ended by error. They are counted apart, as rejected."""
    model = "llama_generate"

    def counts() -> tuple[float, float, float]:
        return (model_value(server, "ge_request_failures_total", model),
                model_value(server, "ge_generate_sequences_ended_total", model, reason="error"),
                model_value(server, "ge_generate_requests_rejected_total", model))

    failures, errors, rejected = counts()
    _generate_refused(server, model)
    wait_until(lambda: counts()[2] >= rejected + 1, timeout=10)  # earlier tests' may still be flushing
    assert counts()[:2] == (failures, errors)


def test_a_refused_request_is_shown_refused_not_as_a_failed_one(server: RunningServer) -> None:
    """Issue 39: refusals read as a failing model ('FAIL 37', 'last error: BACKEND'). As the console, the
    notebooks and status read the model, a refusal leaves its failed requests and health as they were
    and is counted apart, in its token figures' line ('refused N')."""
    from triton_ge_console.display import generation_line
    from triton_ge_console.sessions.observe.generation import generation_row
    from triton_ge_console.sessions.observe.poller import Poller
    from triton_ge_console.sessions.observe.snapshot import Endpoints, ModelSnapshot

    model = "llama_generate"
    poller = Poller("gen", Endpoints(server.http_url, None, server.metrics_url), sample_traces=False)

    def shown() -> ModelSnapshot:
        (found,) = [m for m in poller.poll().models if m.name == model]
        return found

    def refused(snapshot: ModelSnapshot) -> int:
        assert snapshot.generation is not None
        return snapshot.generation.rejected_total or 0

    def counted() -> ModelSnapshot | None:
        snapshot = shown()
        return snapshot if refused(snapshot) > refused(before) else None

    try:
        wait_until(lambda: model_value(server, "ge_generate_running_sequences", model) == 0, timeout=30)
        before = shown()
        _generate_refused(server, model)
        after = wait_until(counted, timeout=10)
    finally:
        poller.close()
    assert (after.failure_total, after.health) == (before.failure_total, before.health)
    assert after.generation is not None
    assert f"refused {refused(after)}" in generation_line(generation_row(after.generation) or {})


def _generate_refused(server: RunningServer, model: str) -> None:
    """One request the model refuses (beyond its generate.max_tokens of 48)."""
    streamer = GrpcStreamer(server.grpc_hostport, model)
    try:
        result = streamer.generate(Generation((1, 2, 3), 49))
    finally:
        streamer.close()
    assert "max_tokens 49: expected 1 to 48" in str(result.error)


def test_vllms_request_figures_are_in_triton_metrics(server: RunningServer) -> None:
    """Issue 39: vLLM's figures in our names. While a stream runs its prompt tokens are counted (at
    prefill, not when it ends) and the KV cache shows used beside reserved with a usage fraction; once a
    generation ended, its e2e latency, queue, prefill and decode times, time per output token and prompt
    and generation lengths are histograms, and TTFT's and e2e's buckets reach past 60 s."""
    model = "llama_long"
    prompted = model_value(server, "ge_generate_prompt_tokens_total", model)
    streamer = GrpcStreamer(server.grpc_hostport, model)
    try:
        streamer.send(Generation(_prompt(37, 50), LONG))
        wait_until(lambda: model_value(server, "ge_generate_kv_cache_used_bytes", model) > 0, timeout=30)
        assert model_value(server, "ge_generate_prompt_tokens_total", model) == prompted + 37
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(server.metrics_url, timeout=5) as response:
            families = text_string_to_metric_families(response.read().decode())
        gauges = {s.name: s.value for family in families for s in family.samples
                  if s.name.startswith("ge_generate_kv_cache") and s.labels.get("model") == model}
        used = gauges["ge_generate_kv_cache_used_bytes"]  # one scrape: the figures of one step
        assert gauges["ge_generate_kv_cache_bytes"] == (37 + LONG) * DEMO_LAYOUT.bytes_per_token > used
        assert gauges["ge_generate_kv_cache_usage_ratio"] == pytest.approx(used / (2048 << 20))
    finally:
        streamer.close(cancel=True)
    _grpc(server, Generation(_prompt(5, 51), 7))

    def count(family: str) -> float:
        return sum(s.value for s in metric_samples(server, family)
                   if s.name.endswith("_count") and s.labels.get("model") == "llama_generate")

    families = ("ge_generate_e2e_request_latency_seconds", "ge_generate_request_queue_time_seconds",
                "ge_generate_request_prefill_time_seconds", "ge_generate_request_decode_time_seconds",
                "ge_generate_time_per_output_token_seconds", "ge_generate_request_prompt_tokens",
                "ge_generate_request_generation_tokens")
    wait_until(lambda: all(count(family) >= 1 for family in families), timeout=10)
    for family in ("ge_generate_time_to_first_token_seconds", "ge_generate_e2e_request_latency_seconds"):
        bounds = {float(s.labels["le"]) for s in metric_samples(server, family) if "le" in s.labels}
        assert max(b for b in bounds if b != float("inf")) >= 60
