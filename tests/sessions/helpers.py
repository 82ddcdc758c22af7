"""Test material for sessions: a tiny Python-backend model repository, a GE spec, process-group checks."""

from __future__ import annotations

import os
from pathlib import Path

import psutil

ECHO_MODEL = '''
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.scale = float(config["parameters"]["scale"]["string_value"])

    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out = pb_utils.Tensor("OUTPUT0", (data * self.scale).astype(np.float32))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
'''

ECHO_CONFIG = '''name: "{name}"
backend: "python"
max_batch_size: {max_batch_size}
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
parameters {{ key: "scale" value {{ string_value: "{scale}" }} }}
'''


SLOW_UNLOAD = """
    def finalize(self):
        import time
        time.sleep({seconds})
"""


SLOW_LOAD = """

_initialize = TritonPythonModel.initialize


def _slow_initialize(self, args):
    import time
    time.sleep({seconds})
    _initialize(self, args)


TritonPythonModel.initialize = _slow_initialize
"""


def write_echo_model(repository: Path, name: str = "echo", max_batch_size: int = 8, scale: str = "2",
                     unload_s: float = 0.0, load_s: float = 0.0) -> Path:
    """A Python-backend model that multiplies its input by the `scale` parameter (and, with unload_s, takes
    that long to unload: a server slow to stop; with load_s, each instance that long to load: a reload
    that can be cut short)."""
    model_dir = repository / name
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    source = ECHO_MODEL + (SLOW_UNLOAD.format(seconds=unload_s) if unload_s else "")
    source += SLOW_LOAD.format(seconds=load_s) if load_s else ""
    (model_dir / "1" / "model.py").write_text(source, encoding="utf-8")
    (model_dir / "config.pbtxt").write_text(
        ECHO_CONFIG.format(name=name, max_batch_size=max_batch_size, scale=scale), encoding="utf-8")
    return model_dir


GE_SPEC = """\
name: {name}
server:
  metrics:
    interval_ms: 500
models:
  - name: bert_model
    backend: ge
    source: demo:bert
    max_batch_size: {max_batch_size}
    dynamic_batching:
      max_queue_delay_microseconds: 100
"""


def write_ge_spec(folder: Path, name: str = "gesession", max_batch_size: int = 8) -> Path:
    """A one-model deployment spec served by the `ge` glue (CPU-emulated demo BERT)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "deploy.yaml"
    path.write_text(GE_SPEC.format(name=name, max_batch_size=max_batch_size), encoding="utf-8")
    return path


def group_processes(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes of a process group."""
    found = []
    for process in psutil.process_iter(["status"]):
        try:
            if os.getpgid(process.pid) == pgid and process.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (ProcessLookupError, psutil.Error):
            continue
    return found
