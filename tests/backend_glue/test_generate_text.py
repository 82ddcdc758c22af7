"""A generate model with a tokenizer, served by a real tritonserver: a text prompt streams text back, one
piece per token beside its id, equal to decoding the direct greedy loop's ids over the same ONNX."""

from __future__ import annotations

import http.client
import json
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from tests.backend_glue.conftest import server_env
from tests.backend_glue.metrics import executions
from tests.conftest import RunningServer, run_triton
from tests.models import TEXT_PROMPT, build_spec, direct_decoder, llama_text
from tests.waiting import until, wait_until
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.generate_text import TextCodec
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.sessions.loadgen.generate_client import Generation, GrpcStreamer

SPEC = "models:" + llama_text()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository, built from the spec by the real builder."""
    root = tmp_path_factory.mktemp("generate_text")
    build_spec(root, SPEC)
    return root


@pytest.fixture(scope="module")
def server(built: Path, triton_dist: TritonDistribution) -> Iterator[RunningServer]:
    """The text-capable generate model, served."""
    install_backend_dir(built / "backends", triton_dist)
    source = str(Path(__file__).resolve().parents[2] / "src")
    with (server_env(PYTHONPATH=source, GE_GLUE_RUN_DIR=str(built / "run")),
          run_triton(triton_dist, built / "repo", built / "backends", models=("llama_text",)) as running):
        yield running


@pytest.fixture(scope="module")
def codec(built: Path) -> TextCodec:
    """The tokenizer the build put beside the model."""
    return TextCodec.from_file(built / "repo" / "llama_text" / "1" / "tokenizer.json")


def _grpc_text(server: RunningServer, text: str, max_tokens: int) -> list[tuple[int, str]]:
    """Stream one text prompt over gRPC: each response's (token_id, text_output)."""
    received: queue.SimpleQueue[Any] = queue.SimpleQueue()
    client = grpcclient.InferenceServerClient(server.grpc_hostport)
    prompt = grpcclient.InferInput("text_input", [1], "BYTES")
    prompt.set_data_from_numpy(np.array([text.encode()], dtype=np.object_))
    tokens = grpcclient.InferInput("max_tokens", [1], "INT64")
    tokens.set_data_from_numpy(np.array([max_tokens], np.int64))
    pieces: list[tuple[int, str]] = []
    try:
        client.start_stream(callback=lambda result, error: received.put(error or result))
        client.async_stream_infer("llama_text", [prompt, tokens], enable_empty_final_response=True)
        while True:
            item = received.get(timeout=120)
            assert not isinstance(item, Exception), item
            response = item.get_response()
            if response.outputs:
                text_output = item.as_numpy("text_output")[0]
                pieces.append((int(item.as_numpy("token_id")[0]), text_output.decode()))
            if response.parameters["triton_final_response"].bool_param:
                return pieces
    finally:
        client.stop_stream()
        client.close()


def test_demo_tokenizer_decodes_every_id_of_the_demo_vocabulary(codec: TextCodec) -> None:
    """The built tokenizer.json is the demo's: every id past the specials is a word; text round-trips."""
    assert all(codec.decode([i]) for i in range(3, 32000, 997))
    assert codec.decode([31999]) != codec.decode([31998])
    ids = codec.encode(TEXT_PROMPT)
    assert len(ids) == 9 and 0 not in ids  # every word known: no <unk>
    assert codec.decode(list(ids)) == TEXT_PROMPT.lower()


def test_a_text_prompt_streams_text_equal_to_the_direct_loop(server: RunningServer, codec: TextCodec) -> None:
    """text_input in, one response per token carrying its id and its text piece: the ids equal the direct
    greedy loop over the encoded prompt, the pieces joined equal decoding those ids."""
    pieces = _grpc_text(server, TEXT_PROMPT, 20)
    expected = direct_decoder()(codec.encode(TEXT_PROMPT), 20)
    assert [token for token, _ in pieces] == expected
    assert "".join(piece for _, piece in pieces) == codec.decode(expected)
    assert all(piece for _, piece in pieces)  # word level: every token adds its word


def test_http_generate_stream_takes_and_gives_text(server: RunningServer, codec: TextCodec) -> None:
    """Triton's generate extension by its own names: {"text_input": ...} in, text_output in each event."""
    connection = http.client.HTTPConnection("127.0.0.1", server.ports.http, timeout=120)
    try:
        connection.request("POST", "/v2/models/llama_text/generate_stream",
                           body=json.dumps({"text_input": TEXT_PROMPT, "max_tokens": 7}).encode(),
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200
        events = [json.loads(line[5:]) for line in response if line.startswith(b"data:")]
    finally:
        connection.close()
    expected = direct_decoder()(codec.encode(TEXT_PROMPT), 7)
    assert [event["token_id"] for event in events] == expected
    assert "".join(event["text_output"] for event in events) == codec.decode(expected)


def test_text_refusals_are_one_clear_error(server: RunningServer) -> None:
    """Both prompts at once, or a text of no token: one error each, naming the tensor."""
    connection = http.client.HTTPConnection("127.0.0.1", server.ports.http, timeout=60)
    errors = []
    try:
        for body in ({"text_input": TEXT_PROMPT, "input_ids": [1, 2]}, {"text_input": "   "}):
            connection.request("POST", "/v2/models/llama_text/generate", body=json.dumps(body).encode(),
                               headers={"Content-Type": "application/json"})
            errors.append(json.loads(connection.getresponse().read())["error"])
    finally:
        connection.close()
    assert "give input_ids or text_input, not both" in errors[0]
    assert "text_input: the text holds no token" in errors[1]


def _generate_error(server: RunningServer, body: dict[str, Any], model: str = "llama_text") -> str:
    """The error /generate answers for this body."""
    connection = http.client.HTTPConnection("127.0.0.1", server.ports.http, timeout=120)
    try:
        connection.request("POST", f"/v2/models/{model}/generate", body=json.dumps(body).encode(),
                           headers={"Content-Type": "application/json"})
        return str(json.loads(connection.getresponse().read())["error"])
    finally:
        connection.close()


def test_a_text_too_long_for_the_context_is_refused_before_it_is_tokenized(server: RunningServer) -> None:
    """Issue 39: a 10 MB text_input was tokenized before any size check (11-14 s on the request path,
    stalling others), then refused for its KV cache. Now its length is checked against the context first:
    refused naming its bytes, the context and the bound (8,192 tokens x 32 bytes)."""
    error = _generate_error(server, {"text_input": "the cache " * 1_000_000, "max_tokens": 4})
    assert ("text_input: 10000000 bytes cannot fit the model's context of 8192 tokens (at most 262144 "
            "bytes are tokenized: 32 a token)") in error


def test_a_text_being_tokenized_holds_no_request_behind_it(server: RunningServer, codec: TextCodec) -> None:
    """Issue 39: text was tokenized on execute's thread, holding the GIL, so a 3-token request sent
    meanwhile waited for the whole text (14 s behind a 10 MB one). A long text within the byte bound
    (260,000 bytes, 130,000 tokens: refused for the context once tokenized) is tokenized on a thread of its
    own: a 3-token request sent once its execute returned has its first token before that refusal."""
    long_text, short_prompt = "x y " * 65_000, (5, 6, 7)
    executed = executions(server, "llama_text")
    refused: dict[str, Any] = {}

    def send_long() -> None:
        refused["error"] = _generate_error(server, {"text_input": long_text, "max_tokens": 4})
        refused["at"] = time.perf_counter()

    streamer = GrpcStreamer(server.grpc_hostport, "llama_text")
    thread = threading.Thread(target=send_long)
    thread.start()
    try:
        wait_until(lambda: executions(server, "llama_text") > executed, timeout=60, interval=0.005)
        short = streamer.generate(Generation(short_prompt, 2))
    finally:
        thread.join(timeout=120)
        streamer.close()
    assert "130000 prompt + 4 max_tokens" in refused["error"]
    assert short.error is None and short.tokens == direct_decoder()(short_prompt, 2)
    assert short.arrivals[0] < refused["at"]


def test_a_misspelt_field_is_refused_naming_it_with_the_one_meant(server: RunningServer) -> None:
    """Issue 39: Triton's generate endpoint passes a JSON field naming no input as a request parameter, so
    max_new_tokens was ignored (128 tokens came back). It is refused, naming the field and the one meant."""
    error = _generate_error(server, {"text_input": TEXT_PROMPT, "max_new_tokens": 4})
    assert "unknown field max_new_tokens (did you mean max_tokens?): this model takes input_ids, " \
           "text_input, max_tokens, temperature, top_k, top_p, seed" in error


def test_the_consoles_test_request_streams_a_prompt_and_shows_its_text(server: RunningServer,
                                                                       codec: TextCodec) -> None:
    """Issue 39: the console's `t` on a generate model said "[501] HTTP end point doesn't support models
    with decoupled transaction policy". Its test request now streams a test prompt over generate_stream
    and its line shows the text that came, the direct loop's decoded."""
    from triton_ge_console.sessions.act.probe import send_test_request

    probe = send_test_request(server.http_url, "llama_text")
    expected = codec.decode(direct_decoder()(codec.encode("the cache of keys and values"), 16))
    assert probe.ok, probe.message
    assert probe.message.startswith("llama_text streamed 16 tokens in ")
    assert probe.message.endswith(f"): {expected!r}") and probe.latency_ms is not None


async def test_the_consoles_load_panel_shows_one_stream_s_text_as_it_arrives(server: RunningServer) -> None:
    """Issue 39: the load panel (b) on a generate model showed figures but not the streamed text. One
    stream's text now shows as its tokens arrive (gRPC's text_output pieces), growing while the run goes."""
    from textual.app import App
    from textual.widgets import Input, Log, Static

    from triton_ge_console.console.screens.loadtest import STREAM_TEXT, LoadTestScreen

    screen = LoadTestScreen("llama_text", server.grpc_hostport, generate=True)
    seen: list[str] = []
    async with App().run_test(size=(140, 45)) as pilot:
        await pilot.app.push_screen(screen)
        screen.query_one("#concurrency", Input).value = "2"
        screen.query_one("#duration", Input).value = "3"
        screen.start()
        log = screen.query_one(Log)

        def finished() -> bool:
            seen.append(str(screen.query_one("#stream-text", Static).render()))
            return any(line.startswith("run done") for line in log.lines)

        await until(pilot, finished, timeout=120, step=0.05, what="run done")
        watched = screen.watched
        assert watched is not None and watched.tokens and watched.text, log.lines
        assert seen[-1] == f"one stream's text: {watched.text[-STREAM_TEXT:]}"
        texts = [shown for shown in seen if shown.startswith("one stream's text: ")]
        assert len(set(texts)) >= 3  # it grew as the tokens came, not once at the end
