"""The built-in demo models run in ONNX Runtime with the documented shapes, are causal, and reproducible."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from triton_ge_console.model_files.onnx_io import graph_io
from triton_ge_console.model_files.tensors import TensorSpec
from triton_ge_console.repository import demo_models

MAX_BYTES = 20 * 1024 * 1024


@pytest.fixture(scope="module")
def llama() -> ort.InferenceSession:
    """ONNX Runtime session over the demo decoder."""
    return ort.InferenceSession(demo_models.demo_bytes("demo:llama"), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def bert() -> ort.InferenceSession:
    """ONNX Runtime session over the demo encoder."""
    return ort.InferenceSession(demo_models.demo_bytes("demo:bert"), providers=["CPUExecutionProvider"])


def _ids(batch: int, seq: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 30000, size=(batch, seq), dtype=np.int64)


@pytest.mark.parametrize("source", ["demo:llama", "demo:bert"])
def test_demo_is_small_valid_onnx_opset_17(source: str) -> None:
    """Each file passes the ONNX checker, stays under 20 MB and declares opset 17."""
    data = demo_models.demo_bytes(source)
    model = onnx.load_from_string(data)
    onnx.checker.check_model(model, full_check=True)
    assert len(data) < MAX_BYTES
    assert [o.version for o in model.opset_import if o.domain == ""] == [17]


@pytest.mark.parametrize("builder", [demo_models.llama_model, demo_models.bert_model])
def test_demo_bytes_are_identical_on_every_build(builder: object) -> None:
    """Two fresh builds (not the cached one) serialize to the same bytes."""
    first = builder().SerializeToString(deterministic=True)  # type: ignore[operator]
    second = builder().SerializeToString(deterministic=True)  # type: ignore[operator]
    assert first == second


def test_graph_io_of_demos() -> None:
    """The graphs declare what the seed config promises, batch and sequence dims variable."""
    assert graph_io(demo_models.demo_proto("demo:llama")) == (
        (TensorSpec("input_ids", "INT64", (-1, -1)),),
        (TensorSpec("logits", "FP32", (-1, -1, 32000)),),
    )
    assert graph_io(demo_models.demo_proto("demo:bert")) == (
        (TensorSpec("input_ids", "INT64", (-1, -1)), TensorSpec("attention_mask", "INT64", (-1, -1))),
        (TensorSpec("pooled", "FP32", (-1, 64)),),
    )


@pytest.mark.parametrize(("batch", "seq"), [(1, 1), (2, 7), (4, 33)])
def test_llama_logits_shape_for_any_length(llama: ort.InferenceSession, batch: int, seq: int) -> None:
    """input_ids [batch, seq] → finite logits [batch, seq, 32000] for any sequence length."""
    (logits,) = llama.run(None, {"input_ids": _ids(batch, seq)})
    assert logits.shape == (batch, seq, 32000)
    assert logits.dtype == np.float32
    assert np.isfinite(logits).all()
    assert logits.std() > 0.01  # a real computation, not zeros


def test_llama_is_causal(llama: ort.InferenceSession) -> None:
    """Changing a later token leaves every earlier position's logits unchanged, and changes its own."""
    ids = _ids(2, 12)
    changed = ids.copy()
    changed[:, 8] = (changed[:, 8] + 1234) % 32000
    (before,) = llama.run(None, {"input_ids": ids})
    (after,) = llama.run(None, {"input_ids": changed})
    np.testing.assert_allclose(after[:, :8], before[:, :8], atol=1e-5)
    assert np.abs(after[:, 8:] - before[:, 8:]).max() > 1e-3


def test_llama_rows_of_a_batch_are_independent(llama: ort.InferenceSession) -> None:
    """Batching two sequences gives each the logits it gets alone (what Triton's batcher relies on)."""
    ids = _ids(2, 5)
    (together,) = llama.run(None, {"input_ids": ids})
    (alone,) = llama.run(None, {"input_ids": ids[1:]})
    np.testing.assert_allclose(together[1:], alone, atol=1e-5)


def test_bert_pooled_shape_and_padding_is_ignored(bert: ort.InferenceSession) -> None:
    """input_ids + attention_mask → pooled [batch, 64]; padded tokens do not change the embedding."""
    ids = _ids(3, 10)
    mask = np.ones_like(ids)
    mask[:, 6:] = 0
    (pooled,) = bert.run(None, {"input_ids": ids, "attention_mask": mask})
    assert pooled.shape == (3, 64)
    assert np.isfinite(pooled).all()
    other_padding = ids.copy()
    other_padding[:, 6:] = 7
    (same,) = bert.run(None, {"input_ids": other_padding, "attention_mask": mask})
    np.testing.assert_allclose(same, pooled, atol=1e-5)
    (unmasked,) = bert.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
    assert np.abs(unmasked - pooled).max() > 1e-4


def test_unknown_demo_names_the_choices() -> None:
    """A demo that does not exist says which ones do."""
    with pytest.raises(KeyError, match="demo:llama, demo:bert"):
        demo_models.demo_proto("demo:gpt")
