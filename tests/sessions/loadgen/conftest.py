"""A small model repository of Python-backend models and one tritonserver shared by the bench tests."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backend_glue.conftest import fake_acl  # noqa: F401 (the glue's fake AscendCL, for --vs-direct)
from tests.conftest import RunningServer, run_triton
from tests.models import write_model
from triton_ge_console.backend_glue.distribution import TritonDistribution

# Echoes every input as OUTPUT<i>; sleeps `delay_ms` per request; answers an error when `fail` is set.
MODEL_PY = textwrap.dedent('''
    import json
    import time

    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            params = json.loads(args["model_config"]).get("parameters", {})
            self.delay = float(params.get("delay_ms", {}).get("string_value", "0")) / 1000
            self.fail = params.get("fail", {}).get("string_value", "") == "yes"

        def execute(self, requests):
            responses = []
            for request in requests:
                if self.delay:
                    time.sleep(self.delay)
                if self.fail:
                    responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("model says no")))
                    continue
                outputs = [pb_utils.Tensor(f"OUTPUT{i}", tensor.as_numpy())
                           for i, tensor in enumerate(request.inputs())]
                responses.append(pb_utils.InferenceResponse(outputs))
            return responses
''')

DELAY_MS = 20.0
DELAY_INSTANCES = 2

CONFIGS = {
    # 20 ms per request, two instances, no batching: capacity 100 req/s.
    "delay": f'''
        backend: "python"
        max_batch_size: 0
        input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
        output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
        instance_group [ {{ count: {DELAY_INSTANCES} kind: KIND_CPU }} ]
        parameters {{ key: "delay_ms" value {{ string_value: "{DELAY_MS:g}" }} }}
    ''',
    # Batching echo: an id input with a dynamic dim, a fixed-shape float input and a string input.
    "echo": '''
        backend: "python"
        max_batch_size: 8
        input [
          { name: "IDS" data_type: TYPE_INT64 dims: [ -1 ] },
          { name: "FEATURES" data_type: TYPE_FP32 dims: [ 2, 3 ] },
          { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] }
        ]
        output [
          { name: "OUTPUT0" data_type: TYPE_INT64 dims: [ -1 ] },
          { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 2, 3 ] },
          { name: "OUTPUT2" data_type: TYPE_STRING dims: [ 1 ] }
        ]
        instance_group [ { count: 1 kind: KIND_CPU } ]
    ''',
    # Every request fails.
    "broken": '''
        backend: "python"
        max_batch_size: 0
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
        instance_group [ { count: 1 kind: KIND_CPU } ]
        parameters { key: "fail" value { string_value: "yes" } }
    ''',
}


def write_repository(root: Path) -> Path:
    """The bench models, each with model.py in version 1."""
    for name, config in CONFIGS.items():
        write_model(root, name, f'name: "{name}"\n' + textwrap.dedent(config), MODEL_PY, "model.py")
    return root


@pytest.fixture(scope="package")
def bench_server(triton_dist: TritonDistribution, python_backends: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One server with the delay, echo and broken models, shared by every bench test."""
    root = tmp_path_factory.mktemp("bench")
    repository = write_repository(root / "models")
    with run_triton(triton_dist, repository, python_backends, models=tuple(CONFIGS)) as server:
        yield server
