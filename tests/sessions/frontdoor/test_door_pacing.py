"""The front door streams each token as its own server-sent event as soon as Triton streams it: against a
model that sends one token every DELAY_S (its send times logged on the host's monotonic clock), every
chunk reaches the official `openai` client before the model sends the next token, and `bench --generate
--endpoint openai` reads intervals of the model's pace, never a burst."""

from __future__ import annotations

import json
import time
from pathlib import Path

import openai
import pytest

from tests.models import byte_tokenizer_json, write_paced_token_model
from triton_ge_console.backend_glue.generate_text import TextCodec
from triton_ge_console.cli import main
from triton_ge_console.repository.demo_tokenizer import demo_tokenizer_json
from triton_ge_console.sessions.frontdoor.serve import RunningDoor
from triton_ge_console.sessions.launcher import LaunchOptions, launch
from triton_ge_console.sessions.server.registry import SessionRecord

pytestmark = pytest.mark.server

DELAY_S = 0.15
TOKENS = 8
PROMPT = "The console watches the cache of keys and values"


@pytest.fixture(scope="module")
def session(module_state: Path) -> SessionRecord:
    """A session serving the paced model, with the demo tokenizer, and the same with a tokenizer of one token
    a byte (paced_bytes), from a repository folder."""
    write_paced_token_model(module_state / "repo", module_state / "sent.log", delay_s=DELAY_S,
                            tokenizer_json=demo_tokenizer_json())
    write_paced_token_model(module_state / "repo", module_state / "bytes.log", name="paced_bytes",
                            delay_s=DELAY_S, tokenizer_json=byte_tokenizer_json())
    return launch(LaunchOptions(source=module_state / "repo", name="pacing", timeout=240))


def _last_sends(module_state: Path, log: str = "sent.log") -> list[float]:
    """The model's send times (monotonic s) of the last request it finished."""
    lines = (module_state / log).read_text(encoding="utf-8").splitlines()
    return [float(value) for value in lines[-1].split()]


def test_each_token_reaches_the_openai_client_as_the_model_sends_it(door: RunningDoor, module_state: Path,
                                                                    session: SessionRecord) -> None:
    """A streamed completion: one chunk per token, each arriving after its token was sent and before the
    model sends the next one (a burst would bring the first ones a whole generation late)."""
    client = openai.OpenAI(base_url=door.url, api_key="unused", max_retries=0, timeout=120)
    stream = client.completions.create(model="paced", prompt=PROMPT, max_tokens=TOKENS, stream=True)
    arrivals, pieces = [], []
    for chunk in stream:
        if chunk.choices and chunk.choices[0].text:
            arrivals.append(time.monotonic())
            pieces.append(chunk.choices[0].text)
    sent = _last_sends(module_state)
    assert session.repository is not None
    codec = TextCodec.from_file(session.repository / "paced" / "1" / "tokenizer.json")
    assert "".join(pieces) == codec.decode(list(codec.encode(PROMPT)[:TOKENS]))
    assert len(sent) == len(arrivals) == TOKENS, (sent, arrivals)
    lags_ms = _lags_ms(arrivals, sent)
    assert all(0 <= lag < DELAY_S * 1000 for lag in lags_ms), lags_ms


def test_bench_through_the_front_door_reads_the_model_s_pace(door: RunningDoor, module_state: Path,
                                                            tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """`bench --generate --endpoint openai`: every interval between tokens it exports is about the model's
    pace (more than half of it), and its ITL p50 is within a fifth of it."""
    export = tmp_path / "paced.jsonl"
    assert main(["bench", "paced", "--generate", "--endpoint", "openai", "--url", door.url,
                 "--prompt-tokens", "4", "--output-tokens", "5", "--requests", "3", "--quiet", "--json", "-",
                 "--export", str(export)]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    itls = [itl for line in export.read_text(encoding="utf-8").splitlines()
            for itl in json.loads(line)["itls_ms"]]
    assert len(itls) == 3 * 4 and all(itl > DELAY_S * 1000 / 2 for itl in itls), itls
    assert abs(row["itl_ms"]["p50"] - DELAY_S * 1000) < DELAY_S * 1000 / 5, row["itl_ms"]


def _lags_ms(arrivals: list[float], sent: list[float]) -> list[float]:
    """How long after the model sent each token its chunk reached the client (ms)."""
    return [round((arrived - sent_at) * 1000, 1) for arrived, sent_at in zip(arrivals, sent, strict=True)]


def test_a_token_with_no_text_yet_is_a_chunk_of_its_own(door: RunningDoor, module_state: Path,
                                                         session: SessionRecord) -> None:
    """A character of three bytes is three tokens here, the first two decoding to no text yet: each is a
    chunk of its own with empty text, as the model sends it, not folded into the next one. vLLM does the
    same (serving_completion.py and serving_chat.py send a chunk for every output with tokens, its text
    empty or not; only a chunk with neither text nor tokens, chunked prefill's, is left out)."""
    client = openai.OpenAI(base_url=door.url, api_key="unused", max_retries=0, timeout=120)
    assert session.repository is not None
    ids = list(TextCodec.from_file(session.repository / "paced_bytes" / "1" / "tokenizer.json").encode("a€b"))
    stream = client.completions.create(model="paced_bytes", prompt=ids, max_tokens=len(ids), stream=True)
    texts, arrivals = [], []
    for chunk in stream:
        if chunk.choices and chunk.choices[0].finish_reason is None:
            arrivals.append(time.monotonic())
            texts.append(chunk.choices[0].text)
    assert texts == ["a", "", "", "€", "b"]
    lags_ms = _lags_ms(arrivals, _last_sends(module_state, "bytes.log"))
    assert all(0 <= lag < DELAY_S * 1000 for lag in lags_ms), lags_ms


def test_a_chat_streams_a_token_with_no_text_yet_as_an_empty_delta(door: RunningDoor) -> None:
    """The same in a chat: after the role, one delta a token, "" for each byte of € but its last."""
    client = openai.OpenAI(base_url=door.url, api_key="unused", max_retries=0, timeout=120)
    stream = client.chat.completions.create(model="paced_bytes", messages=[{"role": "user", "content": "€"}],
                                            max_tokens=10, stream=True)  # the model echoes "user: €\n..."
    deltas = [chunk.choices[0].delta.content for chunk in stream
              if chunk.choices and chunk.choices[0].finish_reason is None]
    assert deltas == ["", "u", "s", "e", "r", ":", " ", "", "", "€", "\n"]  # the role's chunk first
