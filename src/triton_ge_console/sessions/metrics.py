"""Prometheus text from Triton's /metrics (or an npu-exporter) as a typed, indexed table of samples."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from triton_ge_console.sessions.stats import HttpEndpoint

Labels = tuple[tuple[str, str], ...]
ModelKey = tuple[str, str]  # (model, version)


@dataclass(frozen=True)
class MetricSample:
    """One sample line: its full name (suffixes kept, e.g. `_count`), labels and value."""

    name: str
    labels: Labels
    value: float

    def label(self, key: str) -> str | None:
        """The value of one label, if present."""
        return next((v for k, v in self.labels if k == key), None)


class MetricTable:
    """Samples indexed by name, so a poll looks each figure up once instead of scanning the text."""

    def __init__(self, samples: Iterable[MetricSample]) -> None:
        self._by_name: dict[str, list[MetricSample]] = {}
        for sample in samples:
            self._by_name.setdefault(sample.name, []).append(sample)

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def names(self) -> frozenset[str]:
        """Every sample name present."""
        return frozenset(self._by_name)

    def samples(self, name: str) -> list[MetricSample]:
        """All samples with this name (empty when absent)."""
        return self._by_name.get(name, [])

    def by_model(self, name: str) -> dict[ModelKey, float]:
        """Per (model, version) values of a Triton per-model metric, summed over any other labels."""
        values: dict[ModelKey, float] = {}
        for sample in self.samples(name):
            model = sample.label("model")
            if model is None or math.isnan(sample.value):
                continue
            key = (model, sample.label("version") or "")
            values[key] = values.get(key, 0.0) + sample.value
        return values

    def by_model_and(self, name: str, label: str) -> dict[ModelKey, dict[str, float]]:
        """Per (model, version) values split by one more label (e.g. failure `reason`, `quantile`)."""
        values: dict[ModelKey, dict[str, float]] = {}
        for sample in self.samples(name):
            model, extra = sample.label("model"), sample.label(label)
            if model is None or extra is None:
                continue
            values.setdefault((model, sample.label("version") or ""), {})[extra] = sample.value
        return values

    def first(self, name: str, **labels: str) -> float | None:
        """The value of the first sample of `name` whose labels include all given ones."""
        for sample in self.samples(name):
            if all(sample.label(k) == v for k, v in labels.items()):
                return sample.value
        return None


def parse_metrics(text: str) -> MetricTable:
    """Parse Prometheus exposition text with prometheus_client's parser.

    The parser renames counter samples to `<family>_total`; Triton's counters have no such suffix, so a
    counter's samples are also filed under the family's own name (`nv_inference_request_success`).
    """
    samples = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = tuple(sorted(s.labels.items()))
            samples.append(MetricSample(s.name, labels, float(s.value)))
            if family.type == "counter" and s.name == f"{family.name}_total":
                samples.append(MetricSample(family.name, labels, float(s.value)))
    return MetricTable(samples)


class MetricsError(RuntimeError):
    """The metrics endpoint did not answer with parseable Prometheus text."""


def scrape_metrics(endpoint: HttpEndpoint, path: str = "") -> MetricTable:
    """GET the metrics page over a kept-alive connection and parse it."""
    status, body = endpoint.request("GET", path)
    if status != 200:
        raise MetricsError(f"{endpoint.base_url}{path}: HTTP {status}")
    try:
        return parse_metrics(body.decode("utf-8", errors="replace"))
    except ValueError as exc:
        raise MetricsError(f"{endpoint.base_url}{path}: not Prometheus text ({exc})") from exc
