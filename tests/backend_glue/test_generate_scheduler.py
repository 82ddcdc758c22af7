"""Continuous batching without Triton: the scheduler over the demo KV decoder in the glue's ONNX Runtime
executor equals the direct decode loop token for token, however sequences join, leave and wait."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pytest

from tests.models import bf16_kv_decoder
from tests.waiting import wait_until
from triton_ge_console.backend_glue.bfloat16 import BFLOAT16
from triton_ge_console.backend_glue.generate_batch import TokenSampling, kv_layout, pick
from triton_ge_console.backend_glue.generate_protocol import Tokenizer, request_from
from triton_ge_console.backend_glue.generate_scheduler import GenerateRequest, Limits, Scheduler
from triton_ge_console.backend_glue.onnx_executor import OnnxRuntimeExecutor
from triton_ge_console.repository.demo_decoder import DEMO_LAYOUT, direct_greedy, step_feeds
from triton_ge_console.repository.demo_models import demo_bytes


class ListStream:
    """A client that keeps what it receives and may cancel."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.finals = 0
        self.errors: list[str] = []
        self.cancel = False
        self.closed_cancelled = False

    def send(self, token: int, final: bool) -> bool:
        self.tokens.append(token)
        self.finals += final
        return True

    def fail(self, message: str) -> None:
        self.errors.append(message)

    def cancelled(self) -> bool:
        return self.cancel

    def close_cancelled(self) -> None:
        self.closed_cancelled = True


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OnnxRuntimeExecutor]:
    """The glue's CPU executor over demo:llama_kv."""
    path = tmp_path_factory.mktemp("kv") / "model.onnx"
    path.write_bytes(demo_bytes("demo:llama_kv"))
    executor = OnnxRuntimeExecutor(path, intra_op_threads=1)
    yield executor
    executor.close()


@pytest.fixture(scope="module", params=[True, False], ids=["bf16-logits", "fp32-logits"])
def bf16_executor(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[OnnxRuntimeExecutor]:
    """The glue's CPU executor over demo:llama_kv with a BF16 cache (and BF16 or FP32 logits)."""
    path = tmp_path_factory.mktemp("kv_bf16") / "model.onnx"
    path.write_bytes(bf16_kv_decoder(logits=request.param))
    executor = OnnxRuntimeExecutor(path, intra_op_threads=1)
    yield executor
    executor.close()


def _run(executor: OnnxRuntimeExecutor):  # type: ignore[no-untyped-def]
    return lambda feeds: executor.run(feeds)[0]


def _prompt(length: int, seed: int) -> tuple[int, ...]:
    return tuple(int(t) for t in np.random.default_rng(seed).integers(0, 32000, length))


def _one_then_another(executor: OnnxRuntimeExecutor, limits: Limits, first: GenerateRequest,
                      second: GenerateRequest) -> tuple[Scheduler, tuple[ListStream, ListStream],
                                                        list[GenerateRequest]]:
    """A scheduler that took `first` and ran one step before `second` came: it, their streams, the two."""
    scheduler = Scheduler(_run(executor), DEMO_LAYOUT, limits)
    streams = ListStream(), ListStream()
    scheduler.submit(streams[0], first)
    scheduler.step()
    scheduler.submit(streams[1], second)
    return scheduler, streams, [first, second]


def _finish_as_direct(scheduler: Scheduler, executor: OnnxRuntimeExecutor,
                      streams: Iterable[tuple[ListStream, GenerateRequest]]) -> None:
    """Run the scheduler dry; each stream then holds what the direct loop makes of its request."""
    while scheduler.step():
        pass
    for stream, request in streams:
        assert stream.tokens == direct_greedy(_run(executor), DEMO_LAYOUT, list(request.prompt),
                                              request.max_tokens)


def test_layout_is_read_from_the_executor(executor: OnnxRuntimeExecutor) -> None:
    """The cache layout comes from the model's own past inputs."""
    assert kv_layout(executor.inputs, executor.outputs) == DEMO_LAYOUT
    assert DEMO_LAYOUT.bytes_per_token == 2 * 2 * 4 * 16 * 4


def test_a_fresh_run_answers_like_a_bound_one_and_its_outputs_stay_the_callers(
        executor: OnnxRuntimeExecutor) -> None:
    """The generate model's plain runs (decode shapes rarely repeat) give what the buffered runs give,
    and a later run of the same shapes leaves an earlier run's outputs as they were."""
    feeds = [step_feeds(DEMO_LAYOUT, list(_prompt(4, seed)), DEMO_LAYOUT.empty()) for seed in (1, 2)]
    first = executor.run_fresh(feeds[0])
    kept = first["logits"].copy()
    second = executor.run_fresh(feeds[1])
    np.testing.assert_array_equal(first["logits"], kept)
    assert not np.array_equal(first["logits"], second["logits"])
    np.testing.assert_allclose(executor.run(feeds[1])[0]["logits"], second["logits"], rtol=1e-6)


def test_sequences_joining_at_different_steps_equal_the_direct_loop(executor: OnnxRuntimeExecutor) -> None:
    """Three prompts of different lengths, the third arriving mid-way, decode together; each stream
    equals the direct greedy loop run alone, and the one with fewer tokens leaves first."""
    scheduler = Scheduler(_run(executor), DEMO_LAYOUT, Limits(max_tokens=32))
    requests = [GenerateRequest(_prompt(n, seed), tokens) for n, seed, tokens in ((5, 1, 12), (17, 2, 6),
                                                                                  (1, 3, 9))]
    streams = [ListStream() for _ in requests]
    scheduler.submit(streams[0], requests[0])
    scheduler.submit(streams[1], requests[1])
    scheduler.step()
    scheduler.step()
    assert len(scheduler.running) == 2
    scheduler.submit(streams[2], requests[2])
    steps, running_when_second_left = 2, None
    while scheduler.step():
        steps += 1
        if streams[1].finals and running_when_second_left is None:
            running_when_second_left = len(scheduler.running)
    assert running_when_second_left == 2  # it left at once, the other two went on
    for stream, request in zip(streams, requests, strict=True):
        expected = direct_greedy(_run(executor), DEMO_LAYOUT, list(request.prompt), request.max_tokens)
        assert stream.tokens == expected
        assert stream.finals == 1
    assert steps < 6 + 12  # batched, not one after another
    assert scheduler.reserved == 0


def test_a_bf16_cache_decodes_batched_as_the_direct_loop(bf16_executor: OnnxRuntimeExecutor) -> None:
    """A decoder whose past and present keys and values are BF16 (its logits BF16 or FP32): the layout
    counts 2 bytes an element, and sequences joining, chunked and leaving each equal the direct greedy
    loop over the same model token for token, the cache kept BF16 from step to step."""
    layout = kv_layout(bf16_executor.inputs, bf16_executor.outputs)
    assert layout.dtype == BFLOAT16 and layout.bytes_per_token == 2 * 2 * 4 * 16 * 2
    scheduler = Scheduler(_run(bf16_executor), layout, Limits(max_tokens=16, max_batched_tokens=8))
    requests = [GenerateRequest(_prompt(n, seed), tokens) for n, seed, tokens in ((5, 1, 10), (19, 2, 4),
                                                                                  (1, 3, 7))]
    streams = [ListStream() for _ in requests]
    scheduler.submit(streams[0], requests[0])
    scheduler.step()
    scheduler.submit(streams[1], requests[1])
    scheduler.submit(streams[2], requests[2])
    while scheduler.step():
        assert all(a.dtype == BFLOAT16 for a in scheduler.batch.past)
    for stream, request in zip(streams, requests, strict=True):
        expected = direct_greedy(bf16_executor.run_fresh, layout, list(request.prompt), request.max_tokens)
        assert stream.tokens == expected and stream.finals == 1
    assert scheduler.reserved == 0


def test_a_long_prompt_joins_in_chunks_while_others_decode(executor: OnnxRuntimeExecutor) -> None:
    """A 70-token prompt arriving while a sequence decodes is prefilled 32 tokens per step: the running
    sequence gets a token every step meanwhile (not stalled for the whole prompt), and both streams
    equal the direct loop, which prefills in one run."""
    scheduler, (running, joining), requests = _one_then_another(
        executor, Limits(max_tokens=16, max_batched_tokens=32),
        GenerateRequest(_prompt(5, 7), 16), GenerateRequest(_prompt(70, 8), 6))
    counts = []
    for _ in range(3):
        before = len(running.tokens)
        scheduler.step()
        counts.append((len(running.tokens) - before, len(joining.tokens)))
    assert counts == [(1, 0), (1, 0), (1, 2)]  # its first token after the third chunk, then one decoded
    _finish_as_direct(scheduler, executor, zip((running, joining), requests, strict=True))


def test_a_chunk_shaped_like_the_last_decode_step_leaves_the_batch_cache_intact(
        executor: OnnxRuntimeExecutor) -> None:
    """The executor reuses one set of output buffers per input shapes, and the batch feeds the last
    decode step's outputs to the next as they are: a prefill chunk with the same shapes (one token after
    as many as the batch's past) would write into them. The batch copies its cache first, so the
    running sequence still equals the direct loop."""
    scheduler = Scheduler(_run(executor), DEMO_LAYOUT, Limits(max_tokens=8, max_batched_tokens=2))
    running, joining = ListStream(), ListStream()
    requests = [GenerateRequest(_prompt(1, 9), 8), GenerateRequest(_prompt(3, 10), 4)]
    expected = [direct_greedy(_run(executor), DEMO_LAYOUT, list(r.prompt), r.max_tokens) for r in requests]
    scheduler.submit(running, requests[0])  # the direct loop ran these shapes: the executor has buffers
    scheduler.step()  # prefill (1 token) and one decode step: the batch's past is that step's outputs
    scheduler.submit(joining, requests[1])
    while scheduler.step():  # its chunks: 2 tokens, then 1 token after 2 (the batch's last step's shapes)
        pass
    assert [running.tokens, joining.tokens] == expected


def test_the_first_step_runs_on_the_callers_thread_only_while_nothing_runs(
        executor: OnnxRuntimeExecutor) -> None:
    """With nothing running, step_first prefills the newcomer and sends its first token before it returns
    (execute's thread, no wake-up of the stepping thread), and no more: the decoding is the scheduler's
    thread's; once a sequence runs, step_first does nothing."""
    scheduler = Scheduler(_run(executor), DEMO_LAYOUT, Limits(max_tokens=8))
    first, second = ListStream(), ListStream()
    scheduler.submit(first, GenerateRequest(_prompt(4, 11), 8))
    scheduler.step_first()
    assert len(first.tokens) == 1 and [s.stream for s in scheduler.running] == [first]
    scheduler.submit(second, GenerateRequest(_prompt(4, 12), 8))
    scheduler.step_first()
    assert len(first.tokens) == 1 and second.tokens == []


class CountingStream(ListStream):
    """A client that counts how often it is asked whether it left."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def cancelled(self) -> bool:
        self.asked += 1
        return super().cancelled()


def test_the_first_step_asks_no_client_and_a_cancel_before_it_is_seen_at_the_next(
        executor: OnnxRuntimeExecutor) -> None:
    """step_first prefills and sends the first token without asking the client whether it left (a second
    thread's IPC beside the prefill); a client gone before that first token is ended at the next step's
    end, its cache freed."""
    scheduler = Scheduler(_run(executor), DEMO_LAYOUT, Limits(max_tokens=8))
    stream = CountingStream()
    stream.cancel = True  # gone before its first token
    scheduler.submit(stream, GenerateRequest(_prompt(4, 3), 8), wake=False)
    scheduler.step_first()
    assert stream.asked == 0 and stream.tokens != [] and not stream.closed_cancelled
    scheduler.step()
    assert stream.asked == 1 and stream.closed_cancelled and len(stream.tokens) == 1
    assert scheduler.running == [] and scheduler.batch.rows == 0 and scheduler.reserved == 0


def test_a_request_stepped_first_is_decoded_on_by_the_woken_thread(executor: OnnxRuntimeExecutor) -> None:
    """Submitted without waking the stepping thread, as execute does, then stepped first: step_first wakes
    the thread, which decodes the rest; the tokens equal the direct loop's."""
    scheduler = Scheduler(lambda feeds: executor.run_fresh(feeds), DEMO_LAYOUT, Limits(max_tokens=8))
    scheduler.start()
    try:
        stream = ListStream()
        scheduler.submit(stream, GenerateRequest(_prompt(4, 21), 8), wake=False)
        scheduler.step_first()
        wait_until(lambda: stream.finals == 1, timeout=60)
    finally:
        scheduler.stop()
    assert stream.tokens == direct_greedy(_run(executor), DEMO_LAYOUT, list(_prompt(4, 21)), 8)


def test_running_and_kv_bounds_queue_the_rest(executor: OnnxRuntimeExecutor) -> None:
    """With room for two sequences, the third waits until one leaves, then gets its tokens."""
    per_sequence = (4 + 8) * DEMO_LAYOUT.bytes_per_token
    scheduler = Scheduler(_run(executor), DEMO_LAYOUT, Limits(max_tokens=8, kv_cache_bytes=2 * per_sequence))
    streams = [ListStream() for _ in range(3)]
    for index, stream in enumerate(streams):
        assert scheduler.submit(stream, GenerateRequest(_prompt(4, index), 8)) is None
    scheduler.step()
    assert len(scheduler.running) == 2 and scheduler.reserved == 2 * per_sequence
    assert streams[2].tokens == []
    while scheduler.step():
        pass
    assert [len(s.tokens) for s in streams] == [8, 8, 8]


def test_what_can_never_fit_is_refused_clearly(executor: OnnxRuntimeExecutor) -> None:
    """A request larger than the whole KV capacity, or than max_tokens, is refused at once."""
    scheduler = Scheduler(_run(executor), DEMO_LAYOUT, Limits(max_tokens=64, kv_cache_bytes=10_000))
    refusal = scheduler.submit(ListStream(), GenerateRequest(_prompt(4, 0), 8))
    assert refusal is not None and "can never fit" in refusal and "12288 bytes" in refusal
    assert "max_tokens 65" in (scheduler.submit(ListStream(), GenerateRequest((1,), 65)) or "")
    assert "empty" in (scheduler.submit(ListStream(), GenerateRequest((), 4)) or "")


def test_a_cancelled_sequence_frees_its_cache_within_one_step(executor: OnnxRuntimeExecutor) -> None:
    """Cancelled between two steps, a sequence is gone after the next one (cache and reservation), and
    the other sequence carries on."""
    scheduler = Scheduler(_run(executor), DEMO_LAYOUT, Limits(max_tokens=64))
    gone, staying = ListStream(), ListStream()
    scheduler.submit(gone, GenerateRequest(_prompt(3, 0), 64))
    scheduler.submit(staying, GenerateRequest(_prompt(3, 1), 64))
    scheduler.step()
    scheduler.step()
    sequence = next(s for s in scheduler.running if s.stream is gone)
    gone.cancel = True
    received = len(gone.tokens)
    scheduler.step()
    assert sequence.ended == "cancel" and gone.closed_cancelled
    assert scheduler.rows == [s for s in scheduler.running] and scheduler.batch.rows == 1  # its row freed
    assert scheduler.reserved == (3 + 64) * DEMO_LAYOUT.bytes_per_token
    assert len(gone.tokens) == received
    assert [s.stream for s in scheduler.running] == [staying]


def test_a_request_cancelled_while_waiting_gives_up_its_place(executor: OnnxRuntimeExecutor) -> None:
    """With room for one sequence, the second request's client cancels while it waits: at the next step
    it is answered cancelled and leaves the queue, so the third is next, not held behind it."""
    scheduler = Scheduler(_run(executor), DEMO_LAYOUT, Limits(max_tokens=4, max_running=1))
    first, cancelled, third = ListStream(), ListStream(), ListStream()
    for index, stream in enumerate((first, cancelled, third)):
        scheduler.submit(stream, GenerateRequest(_prompt(3, index), 4))
    scheduler.step()
    cancelled.cancel = True
    scheduler.step()
    assert cancelled.closed_cancelled and cancelled.tokens == []
    while scheduler.step():
        pass
    assert len(first.tokens) == len(third.tokens) == 4 and cancelled.tokens == []


def test_an_executor_failure_ends_the_batch_with_the_error() -> None:
    """A run that raises answers each sequence with the error and frees everything."""
    def broken(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise RuntimeError("device lost")

    scheduler = Scheduler(broken, DEMO_LAYOUT, Limits())
    stream = ListStream()
    scheduler.submit(stream, GenerateRequest((1, 2), 4))
    assert not scheduler.step()
    assert stream.errors == ["prefill failed: device lost"] and scheduler.reserved == 0


def test_sampling_is_reproducible_by_seed_and_bounded_by_top_k() -> None:
    """Temperature sampling with a seed repeats; top_k 1 is greedy; top_p keeps the likeliest."""
    logits = np.random.default_rng(0).standard_normal(100).astype(np.float32)
    sampling = TokenSampling(temperature=1.0, seed=7)
    draws = [[pick(logits, sampling, np.random.default_rng(7)) for _ in range(5)] for _ in range(2)]
    assert draws[0] == draws[1]
    best = int(np.argmax(logits))
    assert pick(logits, TokenSampling(temperature=2.0, top_k=1), np.random.default_rng()) == best
    assert pick(logits, TokenSampling(temperature=1.0, top_p=1e-9), np.random.default_rng()) == best
    top3 = TokenSampling(temperature=1.0, top_k=3)
    many = {pick(logits, top3, np.random.default_rng(s)) for s in range(50)}
    assert many <= set(np.argsort(-logits)[:3].tolist())


def test_the_stop_token_ends_a_sequence_with_it(executor: OnnxRuntimeExecutor) -> None:
    """With the spec's eos_token_id, a sequence ends on that token (sent, flagged final) before its
    max_tokens, as the direct loop stops."""
    prompt = _prompt(4, 5)
    free = direct_greedy(_run(executor), DEMO_LAYOUT, list(prompt), 12)
    stop = free[3]
    scheduler = Scheduler(_run(executor), DEMO_LAYOUT, Limits(max_tokens=12, eos_token_id=stop))
    stream = ListStream()
    scheduler.submit(stream, GenerateRequest(prompt, 12))
    while scheduler.step():
        pass
    assert stream.tokens == direct_greedy(_run(executor), DEMO_LAYOUT, list(prompt), 12, eos_token_id=stop)
    assert stream.tokens[-1] == stop and len(stream.tokens) <= 4 and stream.finals == 1


def test_whatever_a_step_raises_ends_the_sequences_with_it() -> None:
    """A model answering without logits (here: no outputs at all) fails every sequence with the reason,
    frees everything, and the scheduler steps on for the next request."""
    scheduler = Scheduler(lambda feeds: {}, DEMO_LAYOUT, Limits())
    first, second = ListStream(), ListStream()
    scheduler.submit(first, GenerateRequest((1, 2), 4))
    scheduler.submit(second, GenerateRequest((3,), 4))
    assert scheduler.guarded_step() is False
    assert first.errors == second.errors == ["generation failed: KeyError: 'present.0.key'"]
    assert scheduler.reserved == 0 and scheduler.running == []
    third = ListStream()
    scheduler.submit(third, GenerateRequest((5,), 4))
    scheduler.guarded_step()
    assert third.errors and scheduler.reserved == 0


def test_a_negative_seed_is_refused_as_a_bad_input() -> None:
    """A negative seed (the input is INT64) is one clear refusal naming it, not an exception from the
    sampler's generator inside execute (which would fail every request of the batch)."""
    inputs = {"input_ids": np.array([1, 2], np.int64), "seed": np.array([-1], np.int64),
              "temperature": np.array([1.0], np.float32)}
    with pytest.raises(ValueError, match=r"seed -1: expected 0 or more"):
        request_from(inputs.get, Limits())
    inputs["seed"] = np.array([0], np.int64)
    assert request_from(inputs.get, Limits()).sampling.seed == 0


def test_a_text_beyond_the_context_is_refused_without_being_tokenized() -> None:
    """Issue 39: a 10 MB text_input was tokenized (11-14 s) before anything bounded it. Its length is
    checked against the context first, so the tokenizer is never asked; a text within the bound is."""
    asked: list[int] = []

    def encode(text: str) -> tuple[int, ...]:
        asked.append(len(text))
        return (1,) * (len(text) // 10)

    tokenizer, limits = Tokenizer(encode, longest_token_bytes=10), Limits(max_tokens=4, max_model_len=100)
    too_long = {"text_input": np.array([b"x" * (100 * 32 + 1)], dtype=np.object_)}
    with pytest.raises(ValueError, match=r"text_input: 3201 bytes cannot fit the model's context of 100 "
                                         r"tokens \(at most 3200 bytes are tokenized: 32 a token\)"):
        request_from(too_long.get, limits, tokenizer)
    assert asked == []
    within = {"text_input": np.array([b"x" * 3200], dtype=np.object_)}
    assert len(request_from(within.get, limits, tokenizer).prompt) == 320 and asked == [3200]


def test_sampling_follows_the_tempered_distribution() -> None:
    """Temperature sampling draws each token as often as softmax(logits / temperature) says, top_p keeps
    the smallest set reaching it, and greedy (temperature 0) always takes the best: a sampler that only
    ever took the argmax, or ignored the temperature, fails here."""
    logits = np.log(np.array([0.75, 0.25, 1e-12], np.float32))
    rng = np.random.default_rng(11)

    def share_of_best(sampling: TokenSampling, draws: int = 4000) -> float:
        return sum(pick(logits, sampling, rng) == 0 for _ in range(draws)) / draws

    assert share_of_best(TokenSampling(temperature=1.0)) == pytest.approx(0.75, abs=0.03)
    flattened = np.sqrt(3) / (np.sqrt(3) + 1)  # temperature 2: probabilities ∝ sqrt(p)
    assert share_of_best(TokenSampling(temperature=2.0)) == pytest.approx(flattened, abs=0.03)
    assert share_of_best(TokenSampling(temperature=1.0, top_p=0.7)) == 1.0  # 0.75 alone reaches 0.7
    assert share_of_best(TokenSampling(temperature=1.0, top_p=0.8)) == pytest.approx(0.75, abs=0.03)
    assert share_of_best(TokenSampling(temperature=0.0), draws=50) == 1.0


def test_a_lone_long_prompt_is_prefilled_in_chunks_of_the_step_budget(executor: OnnxRuntimeExecutor) -> None:
    """Issue 39: a long prompt arriving while nothing runs was prefilled in one run (6,000 tokens: 7.5 s
    and 1.8 GB of attention over prompt x prompt). Every run now feeds at most max_batched_tokens tokens,
    and the stream still equals the direct loop, which prefills in one run."""
    fed: list[int] = []

    def run(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        fed.append(int(feeds["input_ids"].size))
        return executor.run_fresh(feeds)

    scheduler = Scheduler(run, DEMO_LAYOUT, Limits(max_tokens=4, max_batched_tokens=16))
    stream, prompt = ListStream(), _prompt(50, 31)
    scheduler.submit(stream, GenerateRequest(prompt, 4), wake=False)
    scheduler.step_first()
    assert fed == [16] and stream.tokens == []  # execute's thread runs one chunk, not the whole prompt
    while scheduler.step():
        pass
    assert fed[:4] == [16, 16, 16, 2] and max(fed) == 16
    assert stream.tokens == direct_greedy(_run(executor), DEMO_LAYOUT, list(prompt), 4)


def test_a_short_newcomer_gets_its_first_token_before_a_long_prefill_ends(
        executor: OnnxRuntimeExecutor) -> None:
    """Issue 39: a 3-token request sent while a long prompt was being prefilled waited for that whole
    prefill. The shortest remaining prompt goes first within each step's budget: the newcomer's first
    token comes the step after it arrives while the long prompt is still being prefilled; both streams
    equal the direct loop."""
    scheduler, (long, short), requests = _one_then_another(
        executor, Limits(max_tokens=4, max_batched_tokens=16),
        GenerateRequest(_prompt(80, 32), 4), GenerateRequest(_prompt(3, 33), 4))
    scheduler.step()
    assert short.tokens and long.tokens == []  # its first (and a decoded) token, the long one none yet
    _finish_as_direct(scheduler, executor, zip((long, short), requests, strict=True))


def test_a_request_beyond_the_context_is_refused_with_the_numbers(executor: OnnxRuntimeExecutor) -> None:
    """Issue 39: nothing bounded a request's context (a 256 MiB cache admitted ~262k-token prompts). With
    max_model_len, prompt + max_tokens beyond it is refused at once, the numbers named; at it, it runs."""
    scheduler = Scheduler(_run(executor), DEMO_LAYOUT, Limits(max_tokens=64, max_model_len=20))
    refusal = scheduler.submit(ListStream(), GenerateRequest(_prompt(15, 0), 6))
    assert refusal == ("15 prompt + 6 max_tokens = 21 tokens, more than the model's context of 20 "
                       "(generate.max_model_len)")
    assert scheduler.submit(ListStream(), GenerateRequest(_prompt(15, 0), 5)) is None
