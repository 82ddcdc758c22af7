"""Built-in demo models (`demo:llama`, `demo:bert`, and `demo:llama_kv`: the llama with a KV cache):
small real transformers, the same bytes every build."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from triton_ge_console.repository.demo_decoder import llama_kv_model
from triton_ge_console.repository.demo_graph import (
    FLOAT,
    INT64,
    GraphBuilder,
    attention,
    layer_norm,
    linear,
    merge_heads,
    rms_norm,
    split_heads,
    tensor_info,
)

DEMO_PREFIX = "demo:"


@dataclass(frozen=True)
class LlamaShape:
    """Sizes of the demo decoder: LLaMA's vocabulary, a toy width."""

    vocab: int = 32000
    hidden: int = 64
    heads: int = 4
    layers: int = 2
    mlp: int = 128
    rope_base: float = 10000.0


@dataclass(frozen=True)
class BertShape:
    """Sizes of the demo encoder: BERT's vocabulary and position limit, a toy width."""

    vocab: int = 30522
    hidden: int = 64
    heads: int = 4
    layers: int = 2
    mlp: int = 128
    max_positions: int = 512


LLAMA = LlamaShape()
BERT = BertShape()


def _seq_len(g: GraphBuilder, ids: str) -> tuple[str, str]:
    """The sequence length of [B, S] ids at run time, as a scalar and as a 1-element vector."""
    seq_vec = g.op("Slice", g.op("Shape", ids), g.ints("one", [1]), g.ints("two", [2]), hint="seq_len")
    seq_scalar = g.op("Squeeze", seq_vec, g.ints("axis0", [0]))
    return seq_scalar, seq_vec


def _rope_tables(g: GraphBuilder, seq_scalar: str, head_dim: int, base: float) -> tuple[str, str]:
    """cos and sin tables [S, head_dim] for rotary position embeddings, built for any S at run time."""
    positions = g.op(
        "Cast",
        g.op(
            "Range",
            g.const("zero_i64", np.array(0, dtype=np.int64)),
            seq_scalar,
            g.const("one_i64", np.array(1, dtype=np.int64)),
        ),
        to=FLOAT,
    )
    inv_freq = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim)
    freqs = g.op(
        "Mul",
        g.op("Unsqueeze", positions, g.ints("axis1", [1])),
        g.const("rope.inv_freq", inv_freq.reshape(1, -1).astype(np.float32)),
    )
    angles = g.op("Concat", freqs, freqs, axis=-1)
    return g.op("Cos", angles, hint="rope_cos"), g.op("Sin", angles, hint="rope_sin")


def _rotate(g: GraphBuilder, x: str, cos: str, sin: str) -> str:
    """Apply rotary embeddings: x*cos + rotate_half(x)*sin."""
    first, second = g.multi("Split", [x], 2, axis=-1)
    rotated = g.op("Concat", g.op("Neg", second), first, axis=-1)
    return g.op("Add", g.op("Mul", x, cos), g.op("Mul", rotated, sin))


def _causal_bias(g: GraphBuilder, seq_vec: str) -> str:
    """[S, S] additive mask: 0 on and below the diagonal, -1e9 above it, sized at run time."""
    square = g.op("Concat", seq_vec, seq_vec, axis=0)
    ones = g.op("ConstantOfShape", square, value=onnx.helper.make_tensor("one_f", FLOAT, [1], [1.0]))
    upper = g.op("Trilu", ones, g.const("diag_offset", np.array(1, dtype=np.int64)), upper=1)
    return g.op("Mul", upper, g.scalar("mask_value", -1e9), hint="causal_bias")


def _decoder_block(
    g: GraphBuilder, x: str, i: int, shape: LlamaShape, rope: tuple[str, str], bias: str
) -> str:
    """Pre-norm causal self-attention then a SwiGLU MLP, each with a residual."""
    head_dim = shape.hidden // shape.heads
    h = rms_norm(g, x, f"layers.{i}.attn_norm", shape.hidden)
    q, k, v = (
        split_heads(
            g, linear(g, h, f"layers.{i}.attn.{n}", shape.hidden, shape.hidden), shape.heads, head_dim
        )
        for n in ("q", "k", "v")
    )
    context = attention(g, _rotate(g, q, *rope), _rotate(g, k, *rope), v, head_dim, bias)
    attn_out = linear(
        g, merge_heads(g, context, shape.hidden), f"layers.{i}.attn.o", shape.hidden, shape.hidden
    )
    x = g.op("Add", x, attn_out)
    h = rms_norm(g, x, f"layers.{i}.mlp_norm", shape.hidden)
    gate = linear(g, h, f"layers.{i}.mlp.gate", shape.hidden, shape.mlp)
    up = linear(g, h, f"layers.{i}.mlp.up", shape.hidden, shape.mlp)
    act = g.op("Mul", g.op("Mul", gate, g.op("Sigmoid", gate)), up)
    return g.op("Add", x, linear(g, act, f"layers.{i}.mlp.down", shape.mlp, shape.hidden))


def llama_model(shape: LlamaShape = LLAMA, seed: int = 20240601) -> onnx.ModelProto:
    """A tiny LLaMA-style decoder: input_ids [batch, seq] → logits [batch, seq, vocab]."""
    g = GraphBuilder(seed)
    # Tied embeddings: one [hidden, vocab] matrix is both the lookup table (gathered along axis 1) and the
    # LM head, which keeps the file at half the size of separate tables.
    table = g.weight("embed_tokens.weight_t", (shape.hidden, shape.vocab), scale=0.02)
    x = g.op("Transpose", g.op("Gather", table, "input_ids", axis=1), perm=[1, 2, 0], hint="embeddings")
    seq_scalar, seq_vec = _seq_len(g, "input_ids")
    rope = _rope_tables(g, seq_scalar, shape.hidden // shape.heads, shape.rope_base)
    bias = _causal_bias(g, seq_vec)
    for i in range(shape.layers):
        x = _decoder_block(g, x, i, shape, rope, bias)
    x = rms_norm(g, x, "final_norm", shape.hidden)
    last = g.op("MatMul", x, table, hint="lm_head")
    return g.model(
        "demo_llama",
        [tensor_info("input_ids", INT64, ["batch", "sequence"])],
        [tensor_info("logits", FLOAT, ["batch", "sequence", shape.vocab])],
        {last: "logits"},
    )


def _padding_bias(g: GraphBuilder, mask: str) -> str:
    """attention_mask [B, S] (1 keep, 0 pad) → additive bias [B, 1, 1, S]."""
    keep = g.op("Cast", g.op("Unsqueeze", mask, g.ints("axes12", [1, 2])), to=FLOAT)
    return g.op("Mul", g.op("Sub", g.scalar("one_f32", 1.0), keep), g.scalar("pad_value", -1e9))


def _encoder_block(g: GraphBuilder, x: str, i: int, shape: BertShape, bias: str) -> str:
    """Post-norm self-attention then a GELU MLP, as in BERT."""
    head_dim = shape.hidden // shape.heads
    q, k, v = (
        split_heads(
            g,
            linear(g, x, f"encoder.{i}.attn.{n}", shape.hidden, shape.hidden, bias=True),
            shape.heads,
            head_dim,
        )
        for n in ("q", "k", "v")
    )
    context = merge_heads(g, attention(g, q, k, v, head_dim, bias), shape.hidden)
    attn_out = linear(g, context, f"encoder.{i}.attn.o", shape.hidden, shape.hidden, bias=True)
    x = layer_norm(g, g.op("Add", x, attn_out), f"encoder.{i}.attn_norm", shape.hidden)
    h = linear(g, x, f"encoder.{i}.mlp.up", shape.hidden, shape.mlp, bias=True)
    erf = g.op("Erf", g.op("Mul", h, g.scalar(f"encoder.{i}.inv_sqrt2", float(1 / np.sqrt(2)))))
    gelu = g.op(
        "Mul",
        g.op("Mul", h, g.scalar(f"encoder.{i}.half", 0.5)),
        g.op("Add", erf, g.scalar(f"encoder.{i}.one", 1.0)),
    )
    out = linear(g, gelu, f"encoder.{i}.mlp.down", shape.mlp, shape.hidden, bias=True)
    return layer_norm(g, g.op("Add", x, out), f"encoder.{i}.mlp_norm", shape.hidden)


def _masked_mean(g: GraphBuilder, x: str, mask: str) -> str:
    """Mean of the kept tokens' vectors: [B, S, H] with mask [B, S] → [B, H]."""
    keep = g.op("Cast", g.op("Unsqueeze", mask, g.ints("axis_last", [2])), to=FLOAT)
    total = g.op("ReduceSum", g.op("Mul", x, keep), g.ints("axis_seq", [1]), keepdims=0)
    count = g.op("ReduceSum", keep, g.ints("axis_seq", [1]), keepdims=0)
    return g.op("Div", total, g.op("Max", count, g.scalar("min_count", 1.0)))


def bert_model(shape: BertShape = BERT, seed: int = 20240602) -> onnx.ModelProto:
    """A tiny BERT-style encoder: input_ids, attention_mask [batch, seq] → pooled [batch, hidden]."""
    g = GraphBuilder(seed)
    words = g.op("Gather", g.weight("embeddings.word", (shape.vocab, shape.hidden), scale=0.02), "input_ids")
    _, seq_vec = _seq_len(g, "input_ids")
    positions_table = g.weight("embeddings.position", (shape.max_positions, shape.hidden), scale=0.02)
    positions = g.op("Slice", positions_table, g.ints("zero", [0]), seq_vec, g.ints("axis0", [0]))
    x = layer_norm(g, g.op("Add", words, positions), "embeddings.norm", shape.hidden)
    bias = _padding_bias(g, "attention_mask")
    for i in range(shape.layers):
        x = _encoder_block(g, x, i, shape, bias)
    pooled = g.op(
        "Tanh",
        linear(g, _masked_mean(g, x, "attention_mask"), "pooler", shape.hidden, shape.hidden, bias=True),
    )
    inputs = [tensor_info(n, INT64, ["batch", "sequence"]) for n in ("input_ids", "attention_mask")]
    return g.model(
        "demo_bert", inputs, [tensor_info("pooled", FLOAT, ["batch", shape.hidden])], {pooled: "pooled"}
    )


DEMO_BUILDERS: dict[str, Callable[[], onnx.ModelProto]] = {
    "llama": llama_model, "bert": bert_model, "llama_kv": llama_kv_model}


def demo_names() -> tuple[str, ...]:
    """The demo sources a spec may name, as `demo:<name>`."""
    return tuple(f"{DEMO_PREFIX}{name}" for name in DEMO_BUILDERS)


def is_demo(source: str) -> bool:
    """Whether a spec source names a built-in demo model."""
    return source.startswith(DEMO_PREFIX)


@functools.cache
def demo_proto(source: str) -> onnx.ModelProto:
    """The demo model for `demo:<name>` (built once per process)."""
    name = source.removeprefix(DEMO_PREFIX)
    if name not in DEMO_BUILDERS:
        raise KeyError(f"unknown demo model {source!r}; choose one of {', '.join(demo_names())}")
    return DEMO_BUILDERS[name]()


@functools.cache
def demo_bytes(source: str) -> bytes:
    """The serialized ONNX for `demo:<name>`: deterministic, so every build writes the same bytes."""
    return bytes(demo_proto(source).SerializeToString(deterministic=True))
