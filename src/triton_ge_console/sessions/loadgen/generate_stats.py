"""The statistics `bench --generate` gives each figure (TTFT, ITL, e2e latency, input and output sequence
lengths), the ones AIPerf and genai-perf print: avg, min, max, std, p25, p50, p75, p90, p95, p99; and how
many samples a percentile needs before it is more than the largest values seen."""

from __future__ import annotations

import math

import numpy as np

PERCENTILES = (25, 50, 75, 90, 95, 99)
STATISTICS = ("avg", "min", "max", "std", *(f"p{p}" for p in PERCENTILES))


def distribution(values: list[float], scale: float = 1.0) -> dict[str, float | None]:
    """Each statistic of values × scale (None each when there are none); std is the population's, as
    numpy's and AIPerf's."""
    if not values:
        return dict.fromkeys(STATISTICS)
    array = np.asarray(values, dtype=np.float64) * scale
    found = np.percentile(array, PERCENTILES)
    figures: dict[str, float | None] = {"avg": float(array.mean()), "min": float(array.min()),
                                        "max": float(array.max()), "std": float(array.std())}
    figures.update({f"p{p}": float(v) for p, v in zip(PERCENTILES, found, strict=True)})
    return figures


def samples_needed(percentile: int) -> int:
    """The fewest samples for which the p-th percentile has at least one sample above it: 100/(100-p)
    rounded up (p99: 100, p95: 20, p90: 10, p75: 4); with fewer it is an interpolation of the largest."""
    return math.ceil(100 / (100 - percentile) - 1e-9)


def thin_percentiles(count: int) -> list[int]:
    """The percentiles that rest on fewer samples than they need, highest first."""
    return [p for p in reversed(PERCENTILES) if count < samples_needed(p)]
