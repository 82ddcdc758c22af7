"""Prometheus text from Triton's /metrics (or an npu-exporter) as a typed, indexed table of samples."""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import groupby
from operator import attrgetter
from typing import NamedTuple

from prometheus_client.parser import text_string_to_metric_families

from triton_ge_console.errors import GeConsoleError
from triton_ge_console.sessions.observe.stats import HttpEndpoint

Labels = tuple[tuple[str, str], ...]
ModelKey = tuple[str, str]  # (model, version)
Labelled = tuple[Labels, ModelKey | None]  # a label set and the model it names


class MetricSample(NamedTuple):
    """One sample line: its full name (suffixes kept, e.g. `_count`), labels, value and the (model, version)
    its labels name, read once per label set (a tuple: cheap; per-model lookups run every poll)."""

    name: str
    labels: Labels
    value: float
    model: ModelKey | None = None

    def label(self, key: str) -> str | None:
        """The value of one label, if present (a plain loop: a poll asks this hundreds of times)."""
        for name, value in self.labels:
            if name == key:
                return value
        return None


class MetricTable:
    """Samples indexed by name, so a poll looks each figure up once instead of scanning the text."""

    def __init__(self, samples: Iterable[MetricSample]) -> None:
        self._by_name: dict[str, list[MetricSample]] = {}
        for name, run in groupby(samples, key=attrgetter("name")):  # a family's lines are contiguous
            found = self._by_name.get(name)
            if found is None:
                self._by_name[name] = list(run)
            else:
                found.extend(run)

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
        for _, _, value, key in self.samples(name):
            if key is not None and value == value:  # not NaN
                values[key] = values.get(key, 0.0) + value
        return values

    def by_model_and(self, name: str, label: str) -> dict[ModelKey, dict[str, float]]:
        """Per (model, version) values split by one more label (e.g. failure `reason`, `quantile`)."""
        values: dict[ModelKey, dict[str, float]] = {}
        for sample in self.samples(name):
            extra = sample.label(label)
            if sample.model is not None and extra is not None:
                values.setdefault(sample.model, {})[extra] = sample.value
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


def parse_metrics(text: str, skip: tuple[str, ...] = (), lines: PlainLines | None = None) -> MetricTable:
    """Parse Prometheus exposition text: a fast path for plain lines, prometheus_client's parser otherwise.

    Triton's /metrics at 100 models is ~1,300 lines, and prometheus_client's parser alone costs more than
    a poll's whole budget on it; the fast path reads only the plain `name{k="v",...} value [ts]` form and
    hands any text with anything else (escapes, braces in values, odd tokens) to the library, whole.
    `skip` drops families a caller never reads before parsing (per-stage summaries quintuple the text).
    `lines` (one per scraped source) remembers the previous scrape, so its unchanged lines are not parsed
    again. prometheus_client renames Triton's suffix-less counters to `name_total`; MetricTable finds a
    counter by either name.
    """
    samples = (lines or PlainLines()).parse(text, skip)
    return MetricTable(samples if samples is not None else _parse_with_library(without_families(text, skip)))


def _parse_with_library(text: str) -> list[MetricSample]:
    """All samples via prometheus_client."""
    return [
        MetricSample(s.name, labels, float(s.value), _model_key(labels))
        for family in text_string_to_metric_families(text)
        for s in family.samples
        for labels in (tuple(sorted(s.labels.items())),)
    ]


_PLAIN_LINE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^{}\\]*)\})?[ \t]+(\S+)(?:[ \t]+-?\d+)?[ \t]*")
_PLAIN_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)",?')


class PlainLines:
    """The plain-line parser with memory of one source's previous scrape: most lines of a poll repeat the
    last one's (an idle model's counters do not move), and a repeated line gives the very same sample."""

    LABELS_LIMIT = 8192

    def __init__(self) -> None:
        self._previous: dict[str, MetricSample] = {}
        self._skip: tuple[str, ...] = ()
        self._labels: dict[str, Labelled | None] = {}  # Triton repeats each model's label set on many lines

    def parse(self, text: str, skip: tuple[str, ...] = ()) -> list[MetricSample] | None:
        """Samples of text made only of plain lines, or None when any line needs the full parser; lines
        of families starting with a `skip` prefix are left out, as `without_families` leaves them."""
        previous = self._previous if skip == self._skip else {}
        current: dict[str, MetricSample] = {}
        samples: list[MetricSample] = []
        for line in text.splitlines():
            sample = previous.get(line)
            if sample is None:
                if not line or line.startswith("#") or (skip and line.startswith(skip)):
                    continue
                sample = self._sample(line)
                if sample is None:
                    return None
            current[line] = sample
            samples.append(sample)
        self._previous, self._skip = current, skip
        return samples

    def _sample(self, line: str) -> MetricSample | None:
        """One plain line's sample, or None when the line is not plain."""
        match = _PLAIN_LINE.fullmatch(line)
        if match is None:
            return None
        name, label_text, value_text = match.groups()
        labelled = self._labels_of(label_text or "")
        try:
            value = float(value_text)
        except ValueError:
            return None
        if labelled is None:
            return None
        labels, model = labelled
        return MetricSample(name, labels, value, model)

    def _labels_of(self, label_text: str) -> Labelled | None:
        """Sorted label pairs of a label text and the model they name, parsed once (the memory is emptied
        when it grows too big)."""
        if label_text in self._labels:
            return self._labels[label_text]
        if len(self._labels) >= self.LABELS_LIMIT:
            self._labels.clear()
        labels = _plain_labels(label_text)
        labelled = self._labels[label_text] = None if labels is None else (labels, _model_key(labels))
        return labelled


def _parse_plain(text: str) -> list[MetricSample] | None:
    """Samples of text made only of plain lines, or None when any line needs the full parser."""
    return PlainLines().parse(text)


def _plain_labels(label_text: str) -> Labels | None:
    """Sorted label pairs of a plain `k="v",...` text, or None when it is not plain."""
    pairs = _PLAIN_LABEL.findall(label_text)
    if sum(len(k) + len(v) + 4 for k, v in pairs) - (bool(pairs) and not label_text.endswith(",")) \
            != len(label_text):
        return None
    return tuple(sorted(pairs))


class MetricsError(GeConsoleError, RuntimeError):
    """The metrics endpoint did not answer with parseable Prometheus text."""


def scrape_metrics(endpoint: HttpEndpoint, path: str = "", skip: tuple[str, ...] = (),
                   lines: PlainLines | None = None) -> MetricTable:
    """GET the metrics page and parse it, leaving out families named by `skip` prefixes."""
    status, body = endpoint.request("GET", path)
    if status != 200:
        raise MetricsError(f"{endpoint.base_url}{path}: HTTP {status}")
    try:
        return parse_metrics(body.decode("utf-8", errors="replace"), skip, lines)
    except ValueError as exc:
        raise MetricsError(f"{endpoint.base_url}{path}: not Prometheus text ({exc})") from exc
