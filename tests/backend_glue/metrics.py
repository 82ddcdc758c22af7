"""Read Triton's /metrics with prometheus_client's parser, and its statistics API's execution count."""

from __future__ import annotations

import json
import urllib.request

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



def executions(server: RunningServer, model: str) -> int:
    """Triton's count of the model's execute calls (one has returned for each)."""
    with urllib.request.urlopen(f"{server.http_url}/v2/models/{model}/stats", timeout=10) as response:
        return int(json.load(response)["model_stats"][0]["execution_count"])
