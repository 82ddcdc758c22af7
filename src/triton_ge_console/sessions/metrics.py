"""Prometheus text from Triton's /metrics (or an npu-exporter) as a typed, indexed table of samples."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import NamedTuple

from prometheus_client.parser import text_string_to_metric_families

from triton_ge_console.sessions.stats import HttpEndpoint

Labels = tuple[tuple[str, str], ...]
ModelKey = tuple[str, str]  # (model, version)


class MetricSample(NamedTuple):
    """One sample line: its full name (suffixes kept, e.g. `_count`), labels and value (a tuple: cheap)."""

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
        """All samples with this name; a counter is also found by its other name (with/without `_total`)."""
        found = self._by_name.get(name)
        if found is None:
            found = self._by_name.get(name[:-6] if name.endswith("_total") else f"{name}_total", [])
        return found

    def by_model(self, name: str) -> dict[ModelKey, float]:
        """Per (model, version) values of a Triton per-model metric, summed over any other labels."""
        values: dict[ModelKey, float] = {}
        for _, label_pairs, value in self.samples(name):
            key = _model_key(label_pairs)
            if key is None or math.isnan(value):
                continue
            values[key] = values.get(key, 0.0) + value
        return values

    def by_model_and(self, name: str, label: str) -> dict[ModelKey, dict[str, float]]:
        """Per (model, version) values split by one more label (e.g. failure `reason`, `quantile`)."""
        values: dict[ModelKey, dict[str, float]] = {}
        for _, label_pairs, value in self.samples(name):
            labels = dict(label_pairs)
            model, extra = labels.get("model"), labels.get(label)
            if model is None or extra is None:
                continue
            values.setdefault((model, labels.get("version", "")), {})[extra] = value
        return values

    def first(self, name: str, **labels: str) -> float | None:
        """The value of the first sample of `name` whose labels include all given ones."""
        for sample in self.samples(name):
            if all(sample.label(k) == v for k, v in labels.items()):
                return sample.value
        return None


def _model_key(label_pairs: Labels) -> ModelKey | None:
    """(model, version) of a sample; Triton's common `{model=..,version=..}` is read without a dict."""
    if len(label_pairs) == 2 and label_pairs[0][0] == "model" and label_pairs[1][0] == "version":
        return label_pairs[0][1], label_pairs[1][1]
    labels = dict(label_pairs)
    model = labels.get("model")
    return None if model is None else (model, labels.get("version", ""))


def without_families(text: str, skip: tuple[str, ...]) -> str:
    """The text minus every line (samples, HELP, TYPE) of metric names starting with one of `skip`."""
    if not skip:
        return text
    kept = []
    for line in text.splitlines():
        name = line.split(None, 3)[2] if line.startswith("# ") and line.count(" ") >= 2 else line
        if not name.startswith(skip):
            kept.append(line)
    return "\n".join(kept) + "\n"


def parse_metrics(text: str, skip: tuple[str, ...] = ()) -> MetricTable:
    """Parse Prometheus exposition text: a fast path for plain lines, prometheus_client's parser otherwise.

    Triton's /metrics at 100 models is ~1,300 lines, and prometheus_client's parser alone costs more than
    a poll's whole budget on it; the fast path reads only the plain `name{k="v",...} value [ts]` form and
    hands any text with anything else (escapes, braces in values, odd tokens) to the library, whole.
    `skip` drops families a caller never reads before parsing (per-stage summaries quintuple the text).
    prometheus_client renames Triton's suffix-less counters to `name_total`; MetricTable finds a counter by
    either name.
    """
    text = without_families(text, skip)
    samples = _parse_plain(text)
    return MetricTable(samples if samples is not None else _parse_with_library(text))


def _parse_with_library(text: str) -> list[MetricSample]:
    """All samples via prometheus_client."""
    return [
        MetricSample(s.name, tuple(sorted(s.labels.items())), float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


_PLAIN_LINE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^{}\\]*)\})?[ \t]+(\S+)(?:[ \t]+-?\d+)?[ \t]*")
_PLAIN_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)",?')


def _parse_plain(text: str) -> list[MetricSample] | None:
    """Samples of text made only of plain lines, or None when any line needs the full parser."""
    samples: list[MetricSample] = []
    label_cache: dict[str, Labels | None] = {}  # Triton repeats each model's label set on many lines
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _PLAIN_LINE.fullmatch(line)
        if match is None:
            return None
        name, label_text, value_text = match.groups()
        key = label_text or ""
        labels = label_cache[key] if key in label_cache else label_cache.setdefault(key, _plain_labels(key))
        try:
            value = float(value_text)
        except ValueError:
            return None
        if labels is None:
            return None
        samples.append(MetricSample(name, labels, value))
    return samples


def _plain_labels(label_text: str) -> Labels | None:
    """Sorted label pairs of a plain `k="v",...` text, or None when it is not plain."""
    pairs = _PLAIN_LABEL.findall(label_text)
    if sum(len(k) + len(v) + 4 for k, v in pairs) - (bool(pairs) and not label_text.endswith(",")) \
            != len(label_text):
        return None
    return tuple(sorted(pairs))


class MetricsError(RuntimeError):
    """The metrics endpoint did not answer with parseable Prometheus text."""


def scrape_metrics(endpoint: HttpEndpoint, path: str = "", skip: tuple[str, ...] = ()) -> MetricTable:
    """GET the metrics page and parse it, leaving out families named by `skip` prefixes."""
    status, body = endpoint.request("GET", path)
    if status != 200:
        raise MetricsError(f"{endpoint.base_url}{path}: HTTP {status}")
    try:
        return parse_metrics(body.decode("utf-8", errors="replace"), skip)
    except ValueError as exc:
        raise MetricsError(f"{endpoint.base_url}{path}: not Prometheus text ({exc})") from exc
