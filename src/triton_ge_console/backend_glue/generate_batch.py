"""The arrays of generation: a KV decoder's cache layout, one batched decode step's feeds, sampling.

Pure numpy, no Triton: the scheduler (generate_scheduler) drives these, tests check them against the
direct decode loop (repository/demo_decoder.direct_greedy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from triton_ge_console.backend_glue.executor import TRITON_TO_NUMPY, TensorInfo
from triton_ge_console.errors import GeConsoleError

PAST_PREFIX = "past_key_values."
FIXED_INPUTS = ("input_ids", "position_ids", "attention_mask")


@dataclass(frozen=True)
class KvLayout:
    """What a KV decoder's cache looks like, read from its input names and shapes."""

    layers: int
    heads: int
    head_dim: int
    dtype: np.dtype

    @property
    def bytes_per_token(self) -> int:
        """Cache bytes one token of one sequence holds (keys and values of every layer)."""
        return 2 * self.layers * self.heads * self.head_dim * self.dtype.itemsize

    def names(self) -> list[tuple[str, str, str, str]]:
        """(past key, past value, present key, present value) names per layer."""
        return [(f"past_key_values.{i}.key", f"past_key_values.{i}.value", f"present.{i}.key",
                 f"present.{i}.value") for i in range(self.layers)]

    def empty(self, batch: int = 1) -> list[np.ndarray]:
        """A cache with no past: one [batch, heads, 0, head_dim] array per past input."""
        return [np.zeros((batch, self.heads, 0, self.head_dim), self.dtype) for _ in range(2 * self.layers)]


def step_feeds(layout: KvLayout, ids: list[int], past: list[np.ndarray]) -> dict[str, np.ndarray]:
    """One sequence's feeds: these new tokens after a past of past[0].shape[2] tokens."""
    start = past[0].shape[2]
    feeds = {"input_ids": np.array([ids], np.int64),
             "position_ids": np.arange(start, start + len(ids), dtype=np.int64)[None, :],
             "attention_mask": np.ones((1, start + len(ids)), np.int64)}
    for (key, value, _, _), k, v in zip(layout.names(), past[0::2], past[1::2], strict=True):
        feeds[key], feeds[value] = k, v
    return feeds


class LayoutError(GeConsoleError, ValueError):
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


Signature = tuple[tuple[str, tuple[int, ...]], ...]


def signature(feeds: dict[str, np.ndarray]) -> Signature:
    """The feeds' shapes: an executor keeps one set of output buffers per such signature."""
    return tuple(sorted((name, array.shape) for name, array in feeds.items()))


def prefill_feeds(layout: KvLayout, ids: Sequence[int],
                  past: list[np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """One sequence's prompt tokens (all of them, or the next chunk) after its past (none at first)."""
    return step_feeds(layout, list(ids), past if past is not None else layout.empty())


def presents(layout: KvLayout, outputs: dict[str, np.ndarray], copy: bool = False) -> list[np.ndarray]:
    """A run's present keys and values in cache order (copied when the executor may reuse them)."""
    arrays = [outputs[name] for name in _present_names(layout)]
    return [np.array(a) for a in arrays] if copy else arrays


@dataclass
class Batch:
    """The running sequences' keys and values as the next decode step takes them: per past input one
    array [rows, heads, columns, head_dim], a row per sequence, and the attention mask saying which columns
    each row holds (a shorter row has holes, masked out). A step's present outputs are the next step's
    past as they are, so nothing is copied per step: only when a sequence joins or leaves."""

    layout: KvLayout
    past: list[np.ndarray]
    mask: np.ndarray  # [rows, columns] int64: 1 where the row holds a token
    lengths: np.ndarray  # [rows] int64: tokens each row holds (its next position)
    borrowed: Signature | None = None  # the run whose outputs `past` is (the executor may reuse them)

    @classmethod
    def empty(cls, layout: KvLayout) -> Batch:
        """No rows."""
        return cls(layout, layout.empty(0), np.zeros((0, 0), np.int64), np.zeros(0, np.int64))

    @property
    def rows(self) -> int:
        """Sequences in the batch."""
        return len(self.lengths)

    @property
    def nbytes(self) -> int:
        """Bytes the batch's keys and values take."""
        return sum(a.nbytes for a in self.past)

    def feeds(self, tokens: Sequence[int]) -> dict[str, np.ndarray]:
        """One decode step: each row's new token at its own position, after every column it holds."""
        mask = np.concatenate([self.mask, np.ones((self.rows, 1), np.int64)], axis=1)
        feeds = {"input_ids": np.asarray(tokens, np.int64)[:, None],
                 "position_ids": self.lengths[:, None].copy(), "attention_mask": mask}
        feeds.update(zip(_past_names(self.layout), self.past, strict=True))
        return feeds

    def advance(self, feeds: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> None:
        """After a decode step: its presents are the past (not copied), one more column each."""
        self.past = presents(self.layout, outputs)
        self.mask = feeds["attention_mask"]
        self.lengths = self.lengths + 1
        self.borrowed = signature(feeds)

    def own(self, before: dict[str, np.ndarray]) -> None:
        """Copy the past where running these feeds could write into the buffers it is."""
        if self.borrowed is not None and self.borrowed == signature(before):
            self.past = [np.array(a) for a in self.past]
            self.borrowed = None

    def join(self, cache: list[np.ndarray]) -> None:
        """A new last row: a prefilled sequence's cache (per past input [1, heads, length, head_dim])."""
        length = cache[0].shape[2]
        if self.rows == 0:
            self.past, self.borrowed = cache, None
            self.mask = np.ones((1, length), np.int64)
            self.lengths = np.array([length], np.int64)
            return
        rows, columns = self.rows, max(self.mask.shape[1], length)
        past = []
        for old, new in zip(self.past, cache, strict=True):
            array = np.zeros((rows + 1, *old.shape[1:2], columns, old.shape[3]), old.dtype)
            array[:rows, :, :old.shape[2]] = old
            array[rows, :, :length] = new[0]
            past.append(array)
        mask = np.zeros((rows + 1, columns), np.int64)
        mask[:rows, :self.mask.shape[1]] = self.mask
        mask[rows, :length] = 1
        self.past, self.mask, self.borrowed = past, mask, None
        self.lengths = np.append(self.lengths, length)

    def leave(self, rows: Sequence[int]) -> None:
        """Drop these rows, then the columns no row holds any more (a lone row ends with no holes)."""
        if not rows:
            return
        dropped = set(rows)
        keep = [r for r in range(self.rows) if r not in dropped]
        if not keep:
            empty = Batch.empty(self.layout)
            self.past, self.mask, self.lengths, self.borrowed = empty.past, empty.mask, empty.lengths, None
            return
        mask = self.mask[keep]
        used = np.flatnonzero(mask.any(axis=0))
        self.past = [np.ascontiguousarray(a[keep][:, :, used]) for a in self.past]
        self.mask, self.lengths, self.borrowed = mask[:, used], self.lengths[keep], None


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
