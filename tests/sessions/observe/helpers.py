"""Requests and API calls the poller tests make to their server (their models: tests/models.py's echo)."""

from __future__ import annotations

import json
import urllib.request

import numpy as np
import tritonclient.http as triton_http


def infer(client: triton_http.InferenceServerClient, model: str, batch: int = 1) -> None:
    """One request of `batch` rows."""
    tensor = triton_http.InferInput("INPUT0", [batch, 4], "FP32")
    tensor.set_data_from_numpy(np.ones((batch, 4), dtype=np.float32))
    client.infer(model, [tensor])


def statistics(http_url: str, model: str) -> dict:
    """Triton's statistics API answer for one model (version 1)."""
    with urllib.request.urlopen(f"{http_url}/v2/models/{model}/versions/1/stats", timeout=10) as response:
        return json.loads(response.read())["model_stats"][0]


def post(http_url: str, path: str, body: dict | None = None) -> bytes:
    """POST JSON to the server."""
    request = urllib.request.Request(f"{http_url}{path}", data=json.dumps(body or {}).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=120) as response:
        return response.read()
