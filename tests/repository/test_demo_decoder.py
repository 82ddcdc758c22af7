"""demo:llama_kv computes what demo:llama does, a token at a time through its KV cache."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from triton_ge_console.backend_glue.generate_batch import step_feeds
from triton_ge_console.repository import demo_decoder, demo_models


@pytest.fixture(scope="module")
def sessions() -> tuple[ort.InferenceSession, ort.InferenceSession]:
    """The full-sequence llama and the KV-cache one."""
    return tuple(ort.InferenceSession(demo_models.demo_bytes(source), providers=["CPUExecutionProvider"])
                 for source in ("demo:llama", "demo:llama_kv"))  # type: ignore[return-value]


def test_kv_decoder_is_valid_small_and_reproducible() -> None:
    """It passes the full ONNX check, stays small, and two fresh builds give the same bytes."""
    data = demo_models.demo_bytes("demo:llama_kv")
    onnx.checker.check_model(onnx.load_from_string(data), full_check=True)
    assert len(data) < 20 * 1024 * 1024
    assert demo_decoder.llama_kv_model().SerializeToString(deterministic=True) == data


def test_prefill_equals_the_full_llama(sessions: tuple[ort.InferenceSession, ...]) -> None:
    """With no past, the same weights give demo:llama's logits."""
    full, kv = sessions
    prompt = [1, 500, 42, 7, 999, 31999]
    (expected,) = full.run(None, {"input_ids": np.array([prompt])})
    names = [o.name for o in kv.get_outputs()]
    feeds = step_feeds(demo_decoder.DEMO_LAYOUT, prompt, demo_decoder.DEMO_LAYOUT.empty())
    outputs = dict(zip(names, kv.run(None, feeds), strict=True))
    np.testing.assert_allclose(outputs["logits"], expected, atol=1e-5)
    assert outputs["present.1.value"].shape == (1, 4, 6, 16)


def test_direct_kv_loop_equals_recomputing_the_prefix(sessions: tuple[ort.InferenceSession, ...]) -> None:
    """Greedy through the cache, one token a step, gives the tokens the full model gives recomputing the
    whole sequence each time."""
    full, kv = sessions
    names = [o.name for o in kv.get_outputs()]
    prompt = [3, 1415, 9265, 35]
    tokens = demo_decoder.direct_greedy(lambda feeds: dict(zip(names, kv.run(None, feeds), strict=True)),
                                        demo_decoder.DEMO_LAYOUT, prompt, 16)
    ids, expected = list(prompt), []
    for _ in range(16):
        (logits,) = full.run(None, {"input_ids": np.array([ids])})
        expected.append(int(logits[0, -1].argmax()))
        ids.append(expected[-1])
    assert tokens == expected


def test_direct_loop_stops_at_the_stop_token(sessions: tuple[ort.InferenceSession, ...]) -> None:
    """A stop token ends the loop, itself included."""
    _, kv = sessions
    names = [o.name for o in kv.get_outputs()]

    def run(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(names, kv.run(None, feeds), strict=True))

    free = demo_decoder.direct_greedy(run, demo_decoder.DEMO_LAYOUT, [5, 6], 8)
    stopped = demo_decoder.direct_greedy(run, demo_decoder.DEMO_LAYOUT, [5, 6], 8, eos_token_id=free[2])
    assert stopped == free[:free.index(free[2]) + 1]
