"""One test request to a model, its inputs generated from the model's own metadata (UI-free: the console's
`t` and a fleet's rolling reload both send it)."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from triton_ge_console.backend_glue.generate_protocol import TEXT_INPUT, is_generate
from triton_ge_console.sessions.act.control import client_url
from triton_ge_console.sessions.loadgen.generate_client import Generation, http_generate, http_generate_text
from triton_ge_console.sessions.loadgen.inputs import (
    LoadSpecError,
    ModelSignature,
    build_inputs,
    signature_from_metadata,
)
from triton_ge_console.sessions.observe.stats import EndpointError, HttpEndpoint, fetch_model_config
from triton_ge_console.sessions.server.access import explain
from triton_ge_console.triton_terms import parse_endpoint

TEST_TEXT = "the cache of keys and values"  # a generate model's test prompt (words of the demo vocabulary)
TEST_IDS = (1, 450, 4996, 17354, 1701)  # the same as ids, for a model without a tokenizer
TEST_TOKENS = 16


@dataclass(frozen=True)
class ProbeResult:
    """What one request did: ok, the latency, and a line to show."""

    model: str
    ok: bool
    message: str
    latency_ms: float | None = None


def _signature(endpoint: HttpEndpoint, model: str, config: dict[str, Any]) -> ModelSignature:
    """The model's inputs and outputs, from its metadata and loaded config."""
    quoted = urllib.parse.quote(model, safe="")
    metadata = endpoint.json("GET", f"/v2/models/{quoted}")
    return signature_from_metadata(metadata if isinstance(metadata, dict) else {}, config)


def send_test_request(http_url: str, model: str, timeout: float = 30.0,
                      headers: Mapping[str, str] | None = None) -> ProbeResult:
    """Ask the model's metadata, build random inputs of the right shapes, infer once over HTTP(S); a
    generate model (decoupled: Triton's infer endpoint refuses it) streams a test prompt instead."""
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    endpoint = HttpEndpoint(http_url, timeout, dict(headers or {}))
    try:
        config = fetch_model_config(endpoint, model)
        if is_generate(config):
            return _stream_test(http_url, model, config, timeout, dict(headers or {}))
        signature = _signature(endpoint, model, config)
        tensors = build_inputs(signature)
        hostport, ssl = client_url(http_url)
    except (EndpointError, LoadSpecError, ValueError) as exc:
        return ProbeResult(model, False, f"{model}: {exc}")
    finally:
        endpoint.close()
    inputs = []
    for tensor in tensors:
        item = httpclient.InferInput(tensor.name, list(tensor.array.shape), tensor.datatype)
        item.set_data_from_numpy(tensor.array, binary_data=True)
        inputs.append(item)
    client = httpclient.InferenceServerClient(hostport, ssl=ssl, network_timeout=timeout)
    started = time.perf_counter()
    try:
        result = client.infer(model, inputs, headers=dict(headers or {}))
    except (InferenceServerException, OSError) as exc:
        return ProbeResult(model, False, f"{model}: {explain(str(exc), token_sent=bool(headers))}")
    finally:
        client.close()
    elapsed = (time.perf_counter() - started) * 1000.0
    shapes = ", ".join(f"{o.name}{list(getattr(result.as_numpy(o.name), 'shape', ()))}"
                       for o in signature.outputs)
    return ProbeResult(model, True, f"{model} answered in {elapsed:.1f} ms: {shapes}", elapsed)


def _stream_test(http_url: str, model: str, config: dict[str, Any], timeout: float,
                 headers: dict[str, str]) -> ProbeResult:
    """A test prompt streamed from a generate model over generate_stream: text with a tokenizer, else
    token ids; the line says what came and how soon."""
    server = parse_endpoint(http_url, "server URL", path_allowed=True)
    if server.scheme == "https" or server.port is None:
        return ProbeResult(model, False, f"{model}: a generate model's test streams over plain HTTP only")
    host, port = server.host, server.port
    limit = (config.get("parameters") or {}).get("generate_max_tokens", {}).get("string_value", "")
    tokens = min(TEST_TOKENS, int(limit)) if limit.isdigit() else TEST_TOKENS
    inputs = {tensor.get("name") for tensor in config.get("input") or ()}
    text = TEXT_INPUT.name in inputs
    if text:
        result = http_generate_text(host, port, model, TEST_TEXT, tokens, timeout, headers)
    else:
        result = http_generate(host, port, model, Generation(TEST_IDS, tokens), timeout, headers)
    if result.error is not None:
        return ProbeResult(model, False, f"{model}: {explain(result.error, token_sent=bool(headers))}")
    if result.ttft is None or result.e2e is None:
        return ProbeResult(model, False, f"{model}: the stream ended with no token")
    said = repr(result.text) if text else f"ids {result.tokens}"
    return ProbeResult(model, True, f"{model} streamed {len(result.tokens)} tokens in "
                                    f"{result.e2e * 1000:.0f} ms (first after {result.ttft * 1000:.0f} ms): "
                                    f"{said}", result.e2e * 1000)
