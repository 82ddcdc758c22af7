"""The order of interleaved rounds, shared by `bench --vs-direct` and every A/B in benchmarks/."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def round_order(variants: Sequence[T], index: int) -> list[T]:
    """The order of round group `index`: the first variant moves one place every two groups and every other
    group runs backwards (ABBA BAAB for two), so slow drift of a noisy host hits every variant alike."""
    turn = index // 2 % len(variants)
    order = [*variants[turn:], *variants[:turn]]
    return order if index % 2 == 0 else order[::-1]

