"""The demo llama as exported decoders are (`demo:llama_kv`): past/present key-value tensors, so a decode
step costs one token; and the direct greedy decode loop over it that the generate model must equal.

Same weights as `demo:llama` (same seed, drawn in the same order), so with no past it computes the same
logits. Inputs and outputs follow the names Hugging Face Optimum gives exported decoders:
input_ids, position_ids [batch, sequence], attention_mask [batch, total_sequence] (1 keep, 0 padding),
past_key_values.<i>.key/.value [batch, heads, past_sequence, head_dim] → logits [batch, sequence, vocab],
present.<i>.key/.value [batch, heads, total_sequence, head_dim].
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from triton_ge_console.backend_glue.generate_batch import KvLayout, step_feeds
from triton_ge_console.repository.demo_graph import (
    FLOAT,
    INT64,
    GraphBuilder,
    attention,
    linear,
    merge_heads,
    rms_norm,
    split_heads,
    tensor_info,
)

# The demo llama's sizes and seed (demo_models imports this module, so they are repeated, and a test
# checks that both models compute the same logits).
VOCAB, HIDDEN, HEADS, LAYERS, MLP, ROPE_BASE, SEED = 32000, 64, 4, 2, 128, 10000.0, 20240601
HEAD_DIM = HIDDEN // HEADS
# The context its export declares (ONNX metadata, as Hugging Face's config names it): untrained, its RoPE
# keeps positions apart to about 2*pi*ROPE_BASE**((HEAD_DIM-2)/HEAD_DIM) = 19,870 tokens (its slowest
# rotation's period); 8,192 as LLaMA-class exports declare, and the most a request may span in the
# emulation within a second or so of prefill on this kind of host.
CONTEXT = 8192
Run = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


DEMO_LAYOUT = KvLayout(LAYERS, HEADS, HEAD_DIM, np.dtype(np.float32))


def _rope(g: GraphBuilder, positions: str) -> tuple[str, str]:
    """cos and sin [B, 1, S, head_dim] for each token's own position (position_ids [B, S])."""
    inv_freq = 1.0 / ROPE_BASE ** (np.arange(0, HEAD_DIM, 2, dtype=np.float32) / HEAD_DIM)
    pos = g.op("Unsqueeze", g.op("Cast", positions, to=FLOAT), g.ints("axis2", [2]))
    freqs = g.op("Mul", pos, g.const("rope.inv_freq", inv_freq.reshape(1, 1, -1).astype(np.float32)))
    angles = g.op("Unsqueeze", g.op("Concat", freqs, freqs, axis=-1), g.ints("axis1", [1]))
    return g.op("Cos", angles, hint="rope_cos"), g.op("Sin", angles, hint="rope_sin")


def _rotate(g: GraphBuilder, x: str, cos: str, sin: str) -> str:
    """Rotary embeddings: x*cos + rotate_half(x)*sin."""
    first, second = g.multi("Split", [x], 2, axis=-1)
    rotated = g.op("Concat", g.op("Neg", second), first, axis=-1)
    return g.op("Add", g.op("Mul", x, cos), g.op("Mul", rotated, sin))


def _length(g: GraphBuilder, tensor: str, axis: int) -> str:
    """One dim of a tensor at run time, as an int64 scalar."""
    dim = g.op("Slice", g.op("Shape", tensor), g.ints(f"at{axis}", [axis]), g.ints(f"to{axis}", [axis + 1]))
    return g.op("Squeeze", dim, g.ints("axis0", [0]))


def _bias(g: GraphBuilder) -> str:
    """[B, 1, S, T] additive mask: a new token (absolute index T-S+j) sees the keys at or before it
    that attention_mask keeps."""
    zero, one = g.const("zero_i64", np.array(0, np.int64)), g.const("one_i64", np.array(1, np.int64))
    new, total = _length(g, "input_ids", 1), _length(g, "attention_mask", 1)
    keys = g.op("Unsqueeze", g.op("Range", zero, total, one), g.ints("axis0", [0]))  # [1, T]
    queries = g.op("Add", g.op("Range", zero, new, one), g.op("Sub", total, new))
    seen = g.op("LessOrEqual", keys, g.op("Unsqueeze", queries, g.ints("axis1", [1])))  # [S, T]
    masked = g.scalar("mask_value", -1e9)
    causal = g.op("Where", seen, g.scalar("zero_f32", 0.0), masked)
    keep = g.op("Cast", g.op("Unsqueeze", "attention_mask", g.ints("axes12", [1, 2])), to=FLOAT)
    padding = g.op("Mul", g.op("Sub", g.scalar("one_f32", 1.0), keep), masked)
    return g.op("Add", causal, padding, hint="attention_bias")


def _block(g: GraphBuilder, x: str, i: int, rope: tuple[str, str], bias: str) -> tuple[str, str, str]:
    """The demo llama's block with the layer's past keys/values in front of the new ones."""
    h = rms_norm(g, x, f"layers.{i}.attn_norm", HIDDEN)
    q, k, v = (split_heads(g, linear(g, h, f"layers.{i}.attn.{n}", HIDDEN, HIDDEN), HEADS, HEAD_DIM)
               for n in ("q", "k", "v"))
    keys = g.op("Concat", f"past_key_values.{i}.key", _rotate(g, k, *rope), axis=2)
    values = g.op("Concat", f"past_key_values.{i}.value", v, axis=2)
    context = attention(g, _rotate(g, q, *rope), keys, values, HEAD_DIM, bias)
    x = g.op("Add", x, linear(g, merge_heads(g, context, HIDDEN), f"layers.{i}.attn.o", HIDDEN, HIDDEN))
    h = rms_norm(g, x, f"layers.{i}.mlp_norm", HIDDEN)
    gate = linear(g, h, f"layers.{i}.mlp.gate", HIDDEN, MLP)
    up = linear(g, h, f"layers.{i}.mlp.up", HIDDEN, MLP)
    act = g.op("Mul", g.op("Mul", gate, g.op("Sigmoid", gate)), up)
    x = g.op("Add", x, linear(g, act, f"layers.{i}.mlp.down", MLP, HIDDEN))
    return x, g.op("Identity", keys), g.op("Identity", values)


def llama_kv_model() -> onnx.ModelProto:
    """The demo llama with a KV cache: a prefill takes the prompt with no past, a decode step one token."""
    g = GraphBuilder(SEED)
    table = g.weight("embed_tokens.weight_t", (HIDDEN, VOCAB), scale=0.02)
    x = g.op("Transpose", g.op("Gather", table, "input_ids", axis=1), perm=[1, 2, 0], hint="embeddings")
    rope, bias = _rope(g, "position_ids"), _bias(g)
    final: dict[str, str] = {}
    for i, (_, _, present_key, present_value) in enumerate(DEMO_LAYOUT.names()):
        x, keys, values = _block(g, x, i, rope, bias)
        final.update({keys: present_key, values: present_value})
    logits = g.op("MatMul", rms_norm(g, x, "final_norm", HIDDEN), table, hint="lm_head")
    final[logits] = "logits"
    cache: list[int | str] = ["batch", HEADS, "past_sequence", HEAD_DIM]
    inputs = [tensor_info("input_ids", INT64, ["batch", "sequence"]),
              tensor_info("position_ids", INT64, ["batch", "sequence"]),
              tensor_info("attention_mask", INT64, ["batch", "total_sequence"])]
    outputs = [tensor_info("logits", FLOAT, ["batch", "sequence", VOCAB])]
    for past_key, past_value, present_key, present_value in DEMO_LAYOUT.names():
        inputs += [tensor_info(past_key, FLOAT, cache), tensor_info(past_value, FLOAT, cache)]
        outputs += [tensor_info(name, FLOAT, ["batch", HEADS, "total_sequence", HEAD_DIM])
                    for name in (present_key, present_value)]
    model = g.model("demo_llama_kv", inputs, outputs, final)
    onnx.helper.set_model_props(model, {"max_position_embeddings": str(CONTEXT)})
    return model


def direct_greedy(run: Run, layout: KvLayout, prompt: list[int], max_tokens: int,
                  eos_token_id: int | None = None) -> list[int]:
    """The reference: prefill, then one token per step through the KV cache, argmax each time, alone."""
    past, ids, tokens = layout.empty(), list(prompt), list[int]()
    while len(tokens) < max_tokens:
        outputs = run(step_feeds(layout, ids, past))
        token = int(np.argmax(outputs["logits"][0, -1]))
        tokens.append(token)
        if token == eos_token_id:
            break
        past = [outputs[name] for names in layout.names() for name in names[2:]]
        ids = [token]
    return tokens
