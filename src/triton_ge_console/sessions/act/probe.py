"""One test request to a model, its inputs generated from the model's own metadata (UI-free: the console's
`t` and a fleet's rolling reload both send it), and the headers a session's own requests carry."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

from triton_ge_console.sessions.act.control import client_url
from triton_ge_console.sessions.loadgen.inputs import (
    LoadSpecError,
    ModelSignature,
    build_inputs,
    signature_from_metadata,
)
from triton_ge_console.sessions.observe.stats import EndpointError, HttpEndpoint, fetch_model_config
from triton_ge_console.sessions.server.access import explain


@dataclass(frozen=True)
class ProbeResult:
    """What one request did: ok, the latency, and a line to show."""

    model: str
    ok: bool
    message: str
    latency_ms: float | None = None


def _signature(endpoint: HttpEndpoint, model: str) -> ModelSignature:
    """The model's inputs and outputs, from its metadata and loaded config."""
    quoted = urllib.parse.quote(model, safe="")
    metadata = endpoint.json("GET", f"/v2/models/{quoted}")
    return signature_from_metadata(metadata if isinstance(metadata, dict) else {},
                                   fetch_model_config(endpoint, model))


def send_test_request(http_url: str, model: str, timeout: float = 30.0,
                      headers: Mapping[str, str] | None = None) -> ProbeResult:
    """Ask the model's metadata, build random inputs of the right shapes, infer once over HTTP(S)."""
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    endpoint = HttpEndpoint(http_url, timeout, dict(headers or {}))
    try:
        signature = _signature(endpoint, model)
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


def session_headers(source: object) -> dict[str, str]:
    """The headers the session's own requests carry (its token), so commands pass a restricted server."""
    inner = getattr(source, "inner", None)  # a PendingSource delegates to its bound live source
    headers = getattr(inner if inner is not None else source, "request_headers", None)
    return dict(headers) if isinstance(headers, dict) else {}
