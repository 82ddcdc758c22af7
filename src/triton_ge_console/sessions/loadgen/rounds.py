"""Rounds and ranges: the order of interleaved rounds and a figure's median and range over them, shared by
`bench --vs-direct` and every comparison in benchmarks/."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


def round_order(variants: Sequence[T], index: int) -> list[T]:
    """The order of round group `index`: the first variant moves one place every two groups and every other
    group runs backwards (ABBA BAAB for two), so slow drift of a noisy host hits every variant alike."""
    turn = index // 2 % len(variants)
    order = [*variants[turn:], *variants[:turn]]
    return order if index % 2 == 0 else order[::-1]


@dataclass(frozen=True)
class Spread:
    """A figure over rounds: the median and the range (a noisy host's single figure would mislead)."""

    median: float
    low: float
    high: float

    @staticmethod
    def of(values: Iterable[float]) -> Spread:
        """The median and range of some values (one per round)."""
        found = [float(value) for value in values]
        return Spread(statistics.median(found), min(found), max(found))

    def text(self, fmt: str = "{:.2f}", between: str = "–") -> str:
        """'median (low–high)', each figure in `fmt`."""
        return f"{fmt.format(self.median)} ({fmt.format(self.low)}{between}{fmt.format(self.high)})"

    @property
    def resolved(self) -> bool:
        """Whether, as an added cost, every round saw it above zero: a range reaching zero or below is
        this host's noise, not a cost (nor a saving) the run can tell."""
        return self.low > 0

    def cost_text(self, fmt: str = "{:.2f}", between: str = "–") -> str:
        """An added cost as a result when resolved, else "unresolved" with the noise the rounds saw (never
        a negative overhead printed as if measured)."""
        if self.resolved:
            return self.text(fmt, between)
        return (f"unresolved (rounds {fmt.format(self.low)}{between}{fmt.format(self.high)}, "
                f"median {fmt.format(self.median)})")
