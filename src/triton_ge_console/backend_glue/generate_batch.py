"""The arrays of generation: a KV decoder's cache layout, one batched decode step's feeds, sampling.

Pure numpy, no Triton: the scheduler (generate_scheduler) drives these, tests check them against the
direct decode loop (repository/demo_decoder.direct_greedy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from triton_ge_console.backend_glue.executor import TRITON_TO_NUMPY, TensorInfo
from triton_ge_console.repository.demo_decoder import KvLayout

PAST_PREFIX = "past_key_values."
FIXED_INPUTS = ("input_ids", "position_ids", "attention_mask")


class LayoutError(ValueError):
    """A model that is not a KV decoder the generate path can drive; the message says what is missing."""


def kv_layout(inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo]) -> KvLayout:
    """The cache layout of a decoder exported with past/present tensors (Optimum's names), or why not."""
    names = {t.name: t for t in inputs}
    missing = [n for n in FIXED_INPUTS if n not in names]
    past = [t for t in inputs if t.name.startswith(PAST_PREFIX)]
    if missing or not past:
        lacking = ", ".join(missing) or "past_key_values"
        raise LayoutError(f"not a KV-cache decoder: it needs inputs {', '.join(FIXED_INPUTS)} and "
                          f"past_key_values.<i>.key/.value (missing: {lacking})")
    layers = len(past) // 2
    layout_dims = past[0].dims
    if len(layout_dims) != 4 or layout_dims[1] < 1 or layout_dims[3] < 1:
        raise LayoutError(f"{past[0].name}: dims {list(layout_dims)}: expected "
                          "[batch, heads, past, head_dim] with heads and head_dim fixed")
    layout = KvLayout(layers, layout_dims[1], layout_dims[3], TRITON_TO_NUMPY[past[0].data_type])
    produced = {t.name for t in outputs}
    wanted = [n for names_ in layout.names() for n in names_]
    absent = [n for n in wanted if n not in names and n not in produced]
    if absent or "logits" not in produced:
        raise LayoutError(f"not a KV-cache decoder: missing {', '.join(absent) or 'output logits'}")
    return layout


def vocab_size(outputs: Sequence[TensorInfo]) -> int | None:
    """The logits' last dim (the vocabulary), None where the model leaves it dynamic."""
    logits = next((t for t in outputs if t.name == "logits"), None)
    return logits.dims[-1] if logits is not None and logits.dims and logits.dims[-1] > 0 else None


@dataclass
class Cache:
    """One sequence's keys and values: per past input an array [heads, capacity, head_dim], allocated
    whole at prefill (the bytes the scheduler reserved for it), the first `length` positions filled."""

    arrays: list[np.ndarray]
    length: int

    @property
    def nbytes(self) -> int:
        """Bytes the cache holds."""
        return sum(a.nbytes for a in self.arrays)


def prefill_feeds(layout: KvLayout, prompt: Sequence[int]) -> dict[str, np.ndarray]:
    """One sequence's prompt with no past."""
    feeds = {"input_ids": np.asarray([prompt], np.int64),
             "position_ids": np.arange(len(prompt), dtype=np.int64)[None, :],
             "attention_mask": np.ones((1, len(prompt)), np.int64)}
    for name, array in zip(_past_names(layout), layout.empty(), strict=True):
        feeds[name] = array
    return feeds


def decode_feeds(layout: KvLayout, tokens: Sequence[int], caches: Sequence[Cache]) -> dict[str, np.ndarray]:
    """One decode step for several sequences: each one's past padded on the right to the longest, the
    padding masked out, each new token at its own position."""
    lengths = [c.length for c in caches]
    longest = max(lengths)
    batch = len(caches)
    mask = np.zeros((batch, longest + 1), np.int64)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
    mask[:, longest] = 1
    feeds = {"input_ids": np.asarray(tokens, np.int64)[:, None],
             "position_ids": np.asarray(lengths, np.int64)[:, None],
             "attention_mask": mask}
    for index, name in enumerate(_past_names(layout)):
        if batch == 1:  # alone: its cache's filled part as it is, no padding, no copy
            feeds[name] = caches[0].arrays[index][None, :, :lengths[0]]
            continue
        past = np.zeros((batch, layout.heads, longest, layout.head_dim), layout.dtype)
        for row, cache in enumerate(caches):
            past[row, :, :cache.length] = cache.arrays[index][:, :cache.length]
        feeds[name] = past
    return feeds


def prefill_cache(layout: KvLayout, outputs: dict[str, np.ndarray], capacity: int) -> Cache:
    """A cache for `capacity` tokens holding what the prefill computed (copied: the executor reuses
    its output buffers)."""
    arrays = []
    for name in _present_names(layout):
        present = outputs[name][0]
        array = np.zeros((layout.heads, max(capacity, present.shape[1]), layout.head_dim), layout.dtype)
        array[:, :present.shape[1]] = present
        arrays.append(array)
    return Cache(arrays, int(outputs[_present_names(layout)[0]].shape[2]))


def extend_caches(layout: KvLayout, outputs: dict[str, np.ndarray], caches: Sequence[Cache]) -> None:
    """After a decode step, write each sequence's new key and value (the last position) into its cache."""
    for index, name in enumerate(_present_names(layout)):
        present = outputs[name]
        for row, cache in enumerate(caches):
            cache.arrays[index][:, cache.length] = present[row, :, -1]
    for cache in caches:
        cache.length += 1


def _past_names(layout: KvLayout) -> list[str]:
    """Past inputs in cache order (key, value per layer)."""
    return [n for names in layout.names() for n in names[:2]]


def _present_names(layout: KvLayout) -> list[str]:
    """Present outputs in cache order."""
    return [n for names in layout.names() for n in names[2:]]


@dataclass(frozen=True)
class TokenSampling:
    """How a sequence picks its next token: greedy at temperature 0 (the default), else sampled."""

    temperature: float = 0.0
    top_k: int = 0  # 0: all tokens
    top_p: float = 1.0
    seed: int | None = None


def pick(logits: np.ndarray, sampling: TokenSampling, rng: np.random.Generator) -> int:
    """The next token from one position's logits [vocab]."""
    if sampling.temperature <= 0.0:
        return int(np.argmax(logits))
    scaled = logits.astype(np.float64) / sampling.temperature
    order = np.argsort(-scaled, kind="stable")
    if sampling.top_k > 0:
        order = order[:sampling.top_k]
    probs = np.exp(scaled[order] - scaled[order[0]])
    probs /= probs.sum()
    if sampling.top_p < 1.0:
        keep = int(np.searchsorted(np.cumsum(probs), sampling.top_p) + 1)
        order, probs = order[:keep], probs[:keep] / probs[:keep].sum()
    return int(order[rng.choice(len(order), p=probs)])
