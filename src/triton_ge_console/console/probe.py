"""One test request to a model, its inputs generated from the model's own metadata."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from triton_ge_console.sessions.loadgen_inputs import LoadSpecError, build_inputs, signature_from_metadata


@dataclass(frozen=True)
class ProbeResult:
    """What one request did: ok, the latency, and a line to show."""

    model: str
    ok: bool
    message: str
    latency_ms: float | None = None


def _get_json(url: str, timeout: float) -> dict[str, Any]:
    """GET a Triton JSON document; HTTP errors raise with Triton's own error text."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            data = json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        raise RuntimeError(_triton_error(exc)) from None
    return data if isinstance(data, dict) else {}


def _triton_error(exc: urllib.error.HTTPError) -> str:
    """The "error" field Triton puts in a failed response, else the HTTP status."""
    try:
        return str(json.loads(exc.read().decode("utf-8")).get("error", exc))
    except (ValueError, OSError):
        return f"HTTP {exc.code}"


def send_test_request(http_url: str, model: str, timeout: float = 30.0) -> ProbeResult:
    """Ask the model's metadata, build random inputs of the right shapes, infer once over HTTP."""
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    base = f"{http_url.rstrip('/')}/v2/models/{model}"
    try:
        signature = signature_from_metadata(_get_json(base, timeout), _get_json(f"{base}/config", timeout))
        tensors = build_inputs(signature)
    except (RuntimeError, LoadSpecError, urllib.error.URLError, OSError) as exc:
        return ProbeResult(model, False, f"{model}: {exc}")
    inputs = []
    for tensor in tensors:
        item = httpclient.InferInput(tensor.name, list(tensor.array.shape), tensor.datatype)
        item.set_data_from_numpy(tensor.array, binary_data=True)
        inputs.append(item)
    client = httpclient.InferenceServerClient(http_url.split("://", 1)[-1], network_timeout=timeout)
    started = time.perf_counter()
    try:
        result = client.infer(model, inputs)
    except (InferenceServerException, OSError) as exc:
        return ProbeResult(model, False, f"{model}: {exc}")
    finally:
        client.close()
    elapsed = (time.perf_counter() - started) * 1000.0
    shapes = ", ".join(f"{o.name}{list(getattr(result.as_numpy(o.name), 'shape', ()))}"
                       for o in signature.outputs)
    return ProbeResult(model, True, f"{model} answered in {elapsed:.1f} ms: {shapes}", elapsed)
