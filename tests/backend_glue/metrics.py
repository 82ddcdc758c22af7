"""Read Triton's /metrics with prometheus_client's parser, and wait for figures to arrive."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.conftest import RunningServer


def metric_samples(server: RunningServer, name: str) -> list[Sample]:
    """Samples named `name`, or of the family `name` (a histogram's _bucket/_count/_sum samples)."""
    with urllib.request.urlopen(server.metrics_url, timeout=5) as response:
        text = response.read().decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples
            if name in (s.name, family.name)]


def model_value(server: RunningServer, name: str, model: str, **labels: str) -> float:
    """Sum of a metric's samples for one model (over devices), restricted to extra labels if given."""
    return sum(s.value for s in metric_samples(server, name) if s.labels.get("model") == model
               and all(s.labels.get(k) == v for k, v in labels.items()))


def wait_for(condition: Callable[[], Any], timeout: float = 20.0, interval: float = 0.1) -> Any:
    """Poll until condition() is truthy; returns its value, or raises with the last value seen."""
    deadline = time.monotonic() + timeout
    value = condition()
    while not value and time.monotonic() < deadline:
        time.sleep(interval)
        value = condition()
    assert value, f"condition not met within {timeout:.0f}s (last value {value!r})"
    return value
