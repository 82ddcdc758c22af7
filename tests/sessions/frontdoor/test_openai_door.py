"""The OpenAI-compatible front door over a real, token-locked session: the official `openai` client lists
the generate models, streams a completion whose text is Triton's own generate_stream text for the same
greedy prompt, streams a chat completion (through the default chat template) with usage; refusals come in
OpenAI's error shape; a client that goes away cancels its generation on the server."""

from __future__ import annotations

import http.client
import itertools
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.models import TEXT_PROMPT, direct_decoder, llama_text
from tests.waiting import wait_until
from triton_ge_console.backend_glue.generate_text import TextCodec
from triton_ge_console.cli import main
from triton_ge_console.sessions.frontdoor.chat_template import DEFAULT_TEMPLATE, ChatTemplate
from triton_ge_console.sessions.frontdoor.serve import DoorError, RunningDoor, start_openai
from triton_ge_console.sessions.launcher import LaunchOptions, launch
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.process import free_port
from triton_ge_console.sessions.server.registry import SessionRecord

pytestmark = pytest.mark.server

TOKEN = "door-token-0451"
SPEC = "models:" + llama_text() + llama_text("llama_long", max_tokens=8000, kv_cache_mib=64)


@pytest.fixture(scope="module")
def session(module_state: Path) -> SessionRecord:
    """A token-locked session serving the two text generate models, launched from the spec."""
    (module_state / "deploy.yaml").write_text(SPEC, encoding="utf-8")
    return launch(LaunchOptions(source=module_state / "deploy.yaml", name="door", token=TOKEN, timeout=240))


@pytest.fixture
def client(door: RunningDoor) -> openai.OpenAI:
    """The official client, with the session's token as its API key."""
    return openai.OpenAI(base_url=door.url, api_key=TOKEN, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def codec(session: SessionRecord) -> TextCodec:
    """The tokenizer the build put beside the model."""
    assert session.repository is not None
    return TextCodec.from_file(session.repository / "llama_text" / "1" / "tokenizer.json")


def _generate_stream_text(session: SessionRecord, text: str, max_tokens: int) -> str:
    """Triton's own HTTP generate_stream for a text prompt: its text_output pieces joined."""
    host, port = session.http_url.split("://")[-1].rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        connection.request("POST", "/v2/models/llama_text/generate_stream",
                           body=json.dumps({"text_input": text, "max_tokens": max_tokens}).encode(),
                           headers={"Content-Type": "application/json", session.token_header: TOKEN})
        response = connection.getresponse()
        assert response.status == 200, response.read()
        events = [json.loads(line[5:]) for line in response if line.startswith(b"data:")]
    finally:
        connection.close()
    return "".join(event["text_output"] for event in events)


def test_the_client_lists_the_generate_models(client: openai.OpenAI) -> None:
    """/v1/models: the session's ready generate models."""
    assert sorted(model.id for model in client.models.list()) == ["llama_long", "llama_text"]


def test_a_streamed_completion_is_triton_s_generate_stream_text(client: openai.OpenAI, session: SessionRecord,
                                                                codec: TextCodec) -> None:
    """Greedy, 12 tokens: the streamed pieces joined equal generate_stream's text for the same prompt, and
    the usage counts the prompt's tokens and the 12 generated."""
    stream = client.completions.create(model="llama_text", prompt=TEXT_PROMPT, max_tokens=12, temperature=0,
                                       stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(choice.text for chunk in chunks for choice in chunk.choices)
    assert text == _generate_stream_text(session, TEXT_PROMPT, 12)
    assert text == codec.decode(direct_decoder()(codec.encode(TEXT_PROMPT), 12))
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    usage = chunks[-1].usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (9, 12)


def test_a_streamed_chat_goes_through_the_template_and_reports_usage(client: openai.OpenAI,
                                                                      codec: TextCodec) -> None:
    """The demo tokenizer has no chat_template: the documented default renders the messages; the reply is
    the direct greedy loop over that prompt, and the last chunk carries the usage."""
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": TEXT_PROMPT}]
    stream = client.chat.completions.create(model="llama_text", messages=messages,  # type: ignore[arg-type]
                                            max_tokens=10, stream=True, temperature=0,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    prompt = codec.encode(ChatTemplate(DEFAULT_TEMPLATE).render(messages))
    assert text == codec.decode(direct_decoder()(prompt, 10))
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (len(prompt), 10,
                                                                                   len(prompt) + 10)


def test_a_whole_completion_stops_at_a_stop_sequence(client: openai.OpenAI, codec: TextCodec) -> None:
    """Not streamed: the text ends before the stop sequence, finish_reason stop, usage counted."""
    full = codec.decode(direct_decoder()(codec.encode(TEXT_PROMPT), 12))
    stop = full.split()[3]
    reply = client.completions.create(model="llama_text", prompt=TEXT_PROMPT, max_tokens=12, temperature=0,
                                      stop=[stop])
    assert reply.choices[0].text == full[:full.index(stop)]
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None and reply.usage.prompt_tokens == 9
    assert 1 <= reply.usage.completion_tokens < 12


def test_refusals_come_in_openai_s_error_shape(door: RunningDoor) -> None:
    """No token: 401; an unknown model: 404 naming those there are; max_tokens past the model's bound:
    400 naming it — each the official client's own exception, its body OpenAI's error object."""
    with pytest.raises(openai.AuthenticationError) as unauthorised:
        openai.OpenAI(base_url=door.url, api_key="wrong", max_retries=0).models.list()
    assert unauthorised.value.body["code"] == "invalid_api_key"  # type: ignore[index]
    client = openai.OpenAI(base_url=door.url, api_key=TOKEN, max_retries=0)
    with pytest.raises(openai.NotFoundError) as unknown:
        client.completions.create(model="gpt-4", prompt="hi")
    assert "there are: llama_long, llama_text" in unknown.value.message
    with pytest.raises(openai.BadRequestError) as too_many:
        client.chat.completions.create(model="llama_text", messages=[{"role": "user", "content": "hi"}],
                                       max_tokens=33)
    assert too_many.value.body["param"] == "max_tokens"  # type: ignore[index]
    assert "generates at most 32 tokens" in too_many.value.message
    with pytest.raises(openai.BadRequestError) as past_int64:  # the model's seed is INT64
        client.completions.create(model="llama_text", prompt="hi", max_tokens=2, seed=2**63)
    assert past_int64.value.body["param"] == "seed"  # type: ignore[index]
    assert f"seed: expected an integer from 0 to {2**63 - 1}, got {2**63}" in past_int64.value.message


def _ended(session: SessionRecord, reason: str) -> float:
    """ge_generate_sequences_ended_total for llama_long and this reason."""
    assert session.metrics_url is not None
    with urllib.request.urlopen(session.metrics_url, timeout=5) as response:
        text = response.read().decode()
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == "ge_generate_sequences_ended_total" and s.labels.get("model") == "llama_long"
               and s.labels.get("reason") == reason)


def test_a_client_that_goes_away_cancels_its_generation(session: SessionRecord, module_state: Path) -> None:
    """`ge-console openai` in the foreground: a streamed chat of up to 8,000 tokens whose client closes the
    connection after a few chunks ends on the server by cancel, not by its length."""
    port = free_port()
    env = {**os.environ, STATE_DIR_ENV: str(module_state / "state")}
    door = subprocess.Popen([sys.executable, "-m", "triton_ge_console.cli", "openai", "--session", "door",
                             "--port", str(port)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    base = f"http://127.0.0.1:{port}/v1"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        wait_until(lambda: _answers(base, headers), timeout=60, what="the front door answering")
        before = _ended(session, "cancel")
        body = {"model": "llama_long", "stream": True, "max_tokens": 8000,
                "messages": [{"role": "user", "content": TEXT_PROMPT}]}
        url = f"{base}/chat/completions"
        with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as reply:
            assert reply.status_code == 200
            assert len(list(itertools.islice(reply.iter_lines(), 6))) == 6
        wait_until(lambda: _ended(session, "cancel") == before + 1, timeout=60, what="a cancel counted")
        assert _ended(session, "length") == 0
    finally:
        door.terminate()
        out, err = door.communicate(timeout=30)
    assert f"at {base}" in out
    assert "Traceback" not in err, err


def _answers(base: str, headers: dict[str, str]) -> bool:
    """Whether the front door lists models."""
    try:
        return httpx.get(f"{base}/models", headers=headers, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def test_an_address_off_loopback_needs_a_token_locked_session(session: SessionRecord) -> None:
    """Exposed means token-locked: a session without a token cannot be served on 0.0.0.0."""
    with pytest.raises(DoorError, match="needs a token-locked session"):
        start_openai(session.replace(token_ref=None), host="0.0.0.0")


def test_bench_generate_drives_the_front_door_and_triton_alike(
        door: RunningDoor, module_state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`bench --generate --endpoint openai` through the front door (its key from $OPENAI_API_KEY) and the
    same load over Triton's gRPC stream: every generation's lengths in the rows and the export, the
    context naming the endpoint, and Triton's config digest where Triton is asked."""
    monkeypatch.setenv(STATE_DIR_ENV, str(module_state / "state"))
    monkeypatch.setenv("OPENAI_API_KEY", TOKEN)
    common = ["bench", "llama_text", "--generate", "--prompt-tokens", "8", "--output-tokens", "6",
              "--requests", "5", "--quiet", "--json", "-"]
    runs = {}
    for endpoint, where in (("openai", ["--url", door.url]), ("triton", ["--session", "door"])):
        export = tmp_path / f"{endpoint}.jsonl"
        assert main([*common, "--endpoint", endpoint, *where, "--export", str(export)]) == 0
        runs[endpoint] = json.loads(capsys.readouterr().out)
        (row,) = runs[endpoint]["rows"]
        assert (row["requests"], row["errors"], row["output_tokens"]) == (5, 0, 30)
        assert row["input_tokens"]["avg"] == 8 and row["output_tokens_each"]["p50"] == 6
        assert row["itl_ms"]["p25"] > 0 and row["ttft_ms"]["std"] >= 0
        lines = [json.loads(line) for line in export.read_text(encoding="utf-8").splitlines()]
        assert len(lines) == 5 and all(len(line["itls_ms"]) == 5 and line["status"] == "ok" for line in lines)
        assert runs[endpoint]["context"]["endpoint"] == endpoint
        assert any("p99 needs 100" in warning for warning in runs[endpoint]["warnings"])
    assert runs["openai"]["context"]["url"].endswith("/v1")
    assert runs["openai"]["context"]["config_digest"] is None
    assert len(runs["triton"]["context"]["config_digest"]) == 64
    assert runs["triton"]["context"]["server_version"]


def test_an_open_loop_rate_the_server_cannot_keep_up_with_warns(
        session: SessionRecord, module_state: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """1,000 arrivals a second of 16-token generations on two shared cores: far fewer complete a second,
    and the run says so (on stderr and in the JSON) instead of printing figures as if at that rate.
    Seen failing first: a Poisson 20/s run completing 10.1/s warned nothing."""
    monkeypatch.setenv(STATE_DIR_ENV, str(module_state / "state"))
    assert main(["bench", "llama_text", "--generate", "--session", "door", "--rate", "1000",
                 "--distribution", "poisson", "--prompt-tokens", "4", "--output-tokens", "16",
                 "--requests", "30", "--quiet", "--json", "-"]) == 0
    captured = capsys.readouterr()
    (warning,) = [w for w in json.loads(captured.out)["warnings"] if "keep up" in w]
    assert warning.startswith("1000/s (≤") and "the server did not keep up" in warning
    assert f"warning: {warning}" in captured.err


def test_a_whole_completion_s_client_that_goes_away_cancels_it_too(session: SessionRecord,
                                                                    door: RunningDoor) -> None:
    """Not streamed: a client that gives up (its 3 s timeout, then its connection closed) before 8,000
    tokens are generated ends the generation by cancel, not by its length."""
    before = _ended(session, "cancel")
    body = {"model": "llama_long", "prompt": TEXT_PROMPT, "max_tokens": 8000}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{door.url}/completions", json=body, headers={"Authorization": f"Bearer {TOKEN}"},
                   timeout=httpx.Timeout(60, read=3))
    wait_until(lambda: _ended(session, "cancel") == before + 1, timeout=60, what="a cancel counted")
    assert _ended(session, "length") == 0


def test_bench_keeps_its_connection_from_one_generation_to_the_next(door: RunningDoor) -> None:
    """As AIPerf and OpenAI clients pool theirs: a generation read to its end leaves bench's connection
    open for the next (its TTFT then holds no connect), both generations whole."""
    from triton_ge_console.sessions.loadgen.generate_client import Generation, HttpStreamer, openai_generate

    host, port = door.plan.host, door.plan.port
    kept = HttpStreamer(host, port)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        first = openai_generate(host, port, "/v1", "llama_text", Generation((5, 6, 7), 4), headers=headers,
                                kept=kept)
        opened = kept.connection.sock
        second = openai_generate(host, port, "/v1", "llama_text", Generation((8, 9), 5), headers=headers,
                                 kept=kept)
        assert opened is not None and kept.connection.sock is opened
    finally:
        kept.close()
    assert (first.error, first.output_tokens, second.error, second.output_tokens) == (None, 4, None, 5)
