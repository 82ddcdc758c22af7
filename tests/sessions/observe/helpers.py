"""Model repositories of cheap Python-backend models for the snapshot tests (and the overhead benchmark)."""

from __future__ import annotations

import json
import textwrap
import urllib.request
from pathlib import Path

import numpy as np
import tritonclient.http as triton_http

MODEL_PY = textwrap.dedent('''
    import time

    import numpy as np
    import triton_python_backend_utils as pb_utils

    DELAY_S = {delay}
    FAIL = {fail}


    class TritonPythonModel:
        def execute(self, requests):
            if DELAY_S:
                time.sleep(DELAY_S)
            if FAIL:
                raise pb_utils.TritonModelException("refused on purpose")
            responses = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
                output = pb_utils.Tensor("Y", (x + 1).astype(np.float32))
                responses.append(pb_utils.InferenceResponse([output]))
            return responses
''')

CONFIG = textwrap.dedent('''
    name: "{name}"
    backend: "python"
    max_batch_size: 8
    input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 4 ] }} ]
    output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 4 ] }} ]
    instance_group [ {{ kind: KIND_CPU count: 1 }} ]
    {batching}
''')


def write_model(repository: Path, name: str, delay_s: float = 0.0, fail: bool = False,
                batching_delay_us: int | None = None) -> None:
    """One Python-backend model: Y = X + 1 after `delay_s` per execution (or raising when `fail`)."""
    version = repository / name / "1"
    version.mkdir(parents=True, exist_ok=True)
    batching = ("" if batching_delay_us is None
                else f"dynamic_batching {{ max_queue_delay_microseconds: {batching_delay_us} }}")
    (repository / name / "config.pbtxt").write_text(CONFIG.format(name=name, batching=batching))
    (version / "model.py").write_text(MODEL_PY.format(delay=delay_s, fail=fail))


def infer(client: triton_http.InferenceServerClient, model: str, batch: int = 1) -> None:
    """One request of `batch` rows."""
    tensor = triton_http.InferInput("X", [batch, 4], "FP32")
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
