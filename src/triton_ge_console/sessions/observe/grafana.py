"""A Grafana dashboard over the Prometheus metrics the console reads, with the console's panels.

Triton's `nv_*` (per model), the GE glue's `ge_*` (per device and model), a MindX DL npu-exporter's
`npu_chip_info_*` (per chip, label `id`), and a vLLM's or MindIE Server's own names (per `model_name`, as
engine_metrics reads them). The dashboard asks for a Prometheus data source when imported.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from triton_ge_console.sessions.observe.engine_metrics import MEMORY_PREFIX, NAMES
from triton_ge_console.sessions.server.engines import MINDIE, VLLM, label

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
MODEL = 'model=~"$model"'
RATE = "[$__rate_interval]"
SERVED = 'model_name=~"$served"'  # vLLM and MindIE label their series with the served model's name
ENGINE_METRIC_NAMES = frozenset(  # histograms as their queries name them: by their buckets
    name for names in NAMES.values()
    for name in (names.running, names.waiting, *names.kv_usage, names.prompt_tokens, names.generation_tokens,
                 names.success, names.failure, *(f"{h}_bucket" for h in (names.ttft, *names.itl, names.e2e)))
    if name)
METRIC_NAME = re.compile(r"(?<![\w:])((?:nv|ge|npu_chip_info)_[a-zA-Z0-9_]+|"
                         r"(?:vllm:|vllm_profiling_)[a-zA-Z0-9_:]+|"
                         + "|".join(sorted((re.escape(n) for n in ENGINE_METRIC_NAMES if ":" not in n),
                                           key=len, reverse=True))
                         + r")(?![\w:])")
SCHEMA_VERSION = 39


@dataclass(frozen=True)
class Panel:
    """One time-series panel: a title, a unit and its queries (expression, legend)."""

    title: str
    unit: str
    queries: tuple[tuple[str, str], ...]
    description: str = ""


def _rate(metric: str, by: str = "model") -> str:
    """Per-second rate of a per-model counter, summed by `by`."""
    return f"sum by ({by}) (rate({metric}{{{MODEL}}}{RATE}))"


def _per_request_ms(metric: str) -> str:
    """A duration counter (µs) per successful request, in ms."""
    return f"{_rate(metric)} / {_rate('nv_inference_request_success')} / 1000"


DEVICE_PANELS = (
    Panel("NPU utilization (GE glue)", "percentunit",
          (("max by (device, kind) (ge_device_utilization_ratio)", "NPU{{device}} {{kind}}"),)),
    Panel("NPU memory (GE glue)", "bytes",
          (("max by (device) (ge_device_memory_used_bytes)", "NPU{{device}} used"),
           ("max by (device) (ge_device_memory_total_bytes)", "NPU{{device}} total"))),
    Panel("Model memory per NPU (GE glue)", "bytes",
          ((f"sum by (model, device) (ge_model_memory_bytes{{{MODEL}}})", "{{model}} on NPU{{device}}"),),
          "What each model holds on each NPU: an npu_ge model a full copy on every NPU of its device_ids."),
    Panel("NPU utilization (npu-exporter)", "percent", (("npu_chip_info_utilization", "chip {{id}}"),)),
    Panel("NPU HBM (npu-exporter)", "decmbytes",
          (("npu_chip_info_hbm_used_memory", "chip {{id}} used"),
           ("npu_chip_info_hbm_total_memory", "chip {{id}} total"))),
    Panel("NPU temperature and power (npu-exporter)", "none",
          (("npu_chip_info_temperature", "chip {{id}} °C"), ("npu_chip_info_power", "chip {{id}} W"))),
)
MODEL_PANELS = (
    Panel("Queue depth", "short", ((f"sum by (model) (nv_inference_pending_request_count{{{MODEL}}})",
                                    "{{model}}"),)),
    Panel("Requests / s", "reqps", ((_rate("nv_inference_request_success"), "{{model}}"),)),
    Panel("Inferences / s", "short", ((_rate("nv_inference_count"), "{{model}}"),)),
    Panel("Average batch", "short",
          ((f"{_rate('nv_inference_count')} / {_rate('nv_inference_exec_count')}", "{{model}}"),)),
    Panel("Latency p50 / p99 (ms)", "ms",
          ((f'nv_inference_request_summary_us{{{MODEL},quantile="0.5"}} / 1000', "{{model}} p50"),
           (f'nv_inference_request_summary_us{{{MODEL},quantile="0.99"}} / 1000', "{{model}} p99")),
          "Needs Triton's summary latencies (server.metrics.summary_latencies in the spec: opt-in, it costs "
          "every request; the console takes its own percentiles from sampled traces)."),
    Panel("Queue vs compute per request (ms)", "ms",
          ((_per_request_ms("nv_inference_queue_duration_us"), "{{model}} queue"),
           (f"({_rate('nv_inference_compute_input_duration_us')} + "
            f"{_rate('nv_inference_compute_infer_duration_us')} + "
            f"{_rate('nv_inference_compute_output_duration_us')}) / "
            f"{_rate('nv_inference_request_success')} / 1000", "{{model}} compute"))),
    Panel("Failures / s by reason", "reqps",
          ((_rate("nv_inference_request_failure", "model, reason"), "{{model}} {{reason}}"),
           (_rate("ge_request_failures_total"), "{{model}} GE glue error")),
          "The GE glue's error responses are their own series: from 2.47 on, Triton counts a Python "
          "backend's error responses as successes (in Requests / s too); the console moves them to "
          "failures."),
    Panel("Timed out in queue (total)", "short",
          ((f'sum by (model) (nv_inference_request_failure{{{MODEL},reason="REJECTED"}})', "{{model}}"),),
          "Requests the queue policy rejected at their timeout; a full queue's refusals are never counted."),
    Panel("GE executions / s by device", "short",
          ((_rate("ge_executions_total", "model, device"), "{{model}} NPU{{device}}"),)),
)


def _token_quantile(histogram: str, quantile: float) -> str:
    """A quantile in ms of a generate model's seconds histogram over the rate interval."""
    return (f"histogram_quantile({quantile}, sum by (le, model) "
            f"(rate({histogram}_bucket{{{MODEL}}}{RATE}))) * 1000")


GENERATE_PANELS = (
    Panel("Time to first token p50 / p99 (ms)", "ms",
          ((_token_quantile("ge_generate_time_to_first_token_seconds", 0.5), "{{model}} p50"),
           (_token_quantile("ge_generate_time_to_first_token_seconds", 0.99), "{{model}} p99"))),
    Panel("Inter-token latency p50 / p99 (ms)", "ms",
          ((_token_quantile("ge_generate_inter_token_latency_seconds", 0.5), "{{model}} p50"),
           (_token_quantile("ge_generate_inter_token_latency_seconds", 0.99), "{{model}} p99"))),
    Panel("Tokens / s", "short",
          ((_rate("ge_generate_generation_tokens_total"), "{{model}} generated"),
           (_rate("ge_generate_prompt_tokens_total"), "{{model}} prompt"))),
    Panel("Running / waiting sequences", "short",
          ((f"sum by (model) (ge_generate_running_sequences{{{MODEL}}})", "{{model}} running"),
           (f"sum by (model) (ge_generate_waiting_sequences{{{MODEL}}})", "{{model}} waiting"))),
    Panel("KV cache use", "percentunit",
          ((f"sum by (model) (ge_generate_kv_cache_bytes{{{MODEL}}}) / "
            f"sum by (model) (ge_generate_kv_cache_capacity_bytes{{{MODEL}}})", "{{model}}"),),
          "The share of the instances' KV-cache capacity (generate.kv_cache_mib) the running sequences "
          "reserve."),
    Panel("Sequences ended / s by reason", "short",
          ((_rate("ge_generate_sequences_ended_total", "model, reason"), "{{model}} {{reason}}"),)),
)


def _served_quantile(histogram: str | tuple[str, ...], quantile: float) -> str:
    """A quantile in ms of an engine's seconds histogram over the rate interval, per served model; of
    several names (a histogram renamed across releases), the first one the server has."""
    names = (histogram,) if isinstance(histogram, str) else histogram
    rates = " or ".join(f"rate({name}_bucket{{{SERVED}}}{RATE})" for name in names)
    return f"histogram_quantile({quantile}, sum by (le, model_name) ({rates})) * 1000"


def _served_rate(metric: str, by: str = "model_name") -> str:
    """Per-second rate of an engine's counter, per served model."""
    return f"sum by ({by}) (rate({metric}{{{SERVED}}}{RATE}))"


def engine_panels(engine: str) -> tuple[Panel, ...]:
    """The panels of a vLLM or MindIE server, from the names engine_metrics reads (one list of names)."""
    names, who = NAMES[engine], label(engine)
    kv = " or ".join(f"{name}{{{SERVED}}}" for name in names.kv_usage)  # the newest name first, then older
    finished = [(_served_rate(names.success, f"model_name, {names.ended_label}"),
                 f"{{{{model_name}}}} {{{{{names.ended_label}}}}}")] if names.ended_label else \
        [(_served_rate(names.success), "{{model_name}} succeeded")]
    if names.failure:
        finished.append((_served_rate(names.failure), "{{model_name}} failed"))
    return (
        Panel(f"{who}: running / waiting requests", "short",
              ((f"sum by (model_name) ({names.running}{{{SERVED}}})", "{{model_name}} running"),
               (f"sum by (model_name) ({names.waiting}{{{SERVED}}})", "{{model_name}} waiting"))),
        Panel(f"{who}: time to first token / between tokens p99 (ms)", "ms",
              ((_served_quantile(names.ttft, 0.99), "{{model_name}} TTFT p99"),
               (_served_quantile(names.itl, 0.99), "{{model_name}} ITL p99"))),  # newest name first
        Panel(f"{who}: tokens / s", "short",
              ((_served_rate(names.generation_tokens), "{{model_name}} generated"),
               (_served_rate(names.prompt_tokens), "{{model_name}} prompt"))),
        Panel(f"{who}: KV cache use", "percentunit", ((f"max by (model_name) ({kv})", "{{model_name}}"),)),
        Panel(f"{who}: requests finished / s", "reqps", tuple(finished)),
        Panel(f"{who}: end-to-end latency p50 / p99 (ms)", "ms",
              ((_served_quantile(names.e2e, 0.5), "{{model_name}} p50"),
               (_served_quantile(names.e2e, 0.99), "{{model_name}} p99"))),
        *((ASCEND_MEMORY_PANEL,) if engine == VLLM else ()),
    )


# vllm-ascend's engine:memory:* gauges, as MS Service Metric exposes them (GiB; labelled dp, no model_name)
ASCEND_MEMORY_PANEL = Panel(
    "vLLM: NPU memory per worker (vllm-ascend with MS Service Metric)", "gbytes",
    tuple((f"max by (dp) ({MEMORY_PREFIX}{gauge})", f"dp {{{{dp}}}} {what}")
          for gauge, what in (("weights_gb", "weights"), ("kvcache_gb", "KV cache"),
                              ("reserved_gb", "reserved"), ("total_gb", "NPU total"))),
    "Each data-parallel rank's worker after warm-up; only a vllm-ascend started with ms-service-metric on.")


def _panel(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    """One panel's JSON, 12 columns wide, 8 high."""
    return {
        "id": panel_id, "type": "timeseries", "title": panel.title, "description": panel.description,
        "datasource": DATASOURCE, "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "targets": [{"datasource": DATASOURCE, "expr": expr, "legendFormat": legend, "refId": chr(65 + i)}
                    for i, (expr, legend) in enumerate(panel.queries)],
    }


def _row(title: str, panel_id: int, y: int) -> dict[str, Any]:
    """A collapsible row heading."""
    return {"id": panel_id, "type": "row", "title": title, "collapsed": False, "panels": [],
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}}


def _templating() -> dict[str, Any]:
    """A Prometheus data source picker and a model filter."""
    return {"list": [
        {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"},
        {"name": "model", "type": "query", "label": "Model", "datasource": DATASOURCE,
         "query": {"query": "label_values(nv_inference_count, model)", "refId": "models"},
         "definition": "label_values(nv_inference_count, model)", "refresh": 2,
         "includeAll": True, "multi": True, "allValue": ".*", "current": {"text": "All", "value": "$__all"}},
        {"name": "served", "type": "query", "label": "vLLM / MindIE model", "datasource": DATASOURCE,
         "query": {"query": "label_values(model_name)", "refId": "served"},
         "definition": "label_values(model_name)", "refresh": 2,
         "includeAll": True, "multi": True, "allValue": ".*", "current": {"text": "All", "value": "$__all"}},
    ]}


def dashboard(title: str = "Triton GE Console", refresh: str = "5s") -> dict[str, Any]:
    """The whole dashboard: devices, then models, each panel in a two-column grid."""
    panels: list[dict[str, Any]] = []
    y = 0
    for heading, group in (("NPUs", DEVICE_PANELS), ("Models", MODEL_PANELS),
                           ("Generation (generate models)", GENERATE_PANELS),
                           ("vLLM / vllm-ascend", engine_panels(VLLM)),
                           ("MindIE Server", engine_panels(MINDIE))):
        panels.append(_row(heading, len(panels) + 1, y))
        y += 1
        for index, panel in enumerate(group):
            panels.append(_panel(panel, len(panels) + 1, 12 * (index % 2), y + 8 * (index // 2)))
        y += 8 * ((len(group) + 1) // 2)
    return {"title": title, "uid": "triton-ge-console", "schemaVersion": SCHEMA_VERSION, "version": 1,
            "editable": True, "refresh": refresh, "time": {"from": "now-15m", "to": "now"},
            "tags": ["triton", "ascend", "ge"], "templating": _templating(), "panels": panels}


def dashboard_json(title: str = "Triton GE Console") -> str:
    """The dashboard as the JSON Grafana imports."""
    return json.dumps(dashboard(title), indent=2, ensure_ascii=False) + "\n"


def queried_metrics(board: dict[str, Any]) -> dict[str, set[str]]:
    """Per panel title, the metric names its queries read (what a Prometheus must have for it)."""
    return {panel["title"]: {name for target in panel.get("targets", ())
                             for name in METRIC_NAME.findall(target["expr"])}
            for panel in board["panels"] if panel["type"] != "row"}
