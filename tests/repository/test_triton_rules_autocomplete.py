"""auto_complete_config runs offline: in its own process, within a time limit, without network."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from tests.models import write_model
from triton_ge_console.repository.rules import triton_autocomplete as triton_rules_autocomplete
from triton_ge_console.repository.validate import validate_config_text, validate_path

MODEL = '''import os
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
{body}
        return config
'''


def _model(tmp_path: Path, body: str) -> Path:
    """A python model (no inputs declared) whose auto_complete_config runs body."""
    code = "\n".join(f"        {line}" for line in body.splitlines())
    return write_model(tmp_path, "m", 'name: "m"\nbackend: "python"\n', MODEL.format(body=code), "model.py")


def test_no_network(tmp_path: Path) -> None:
    """A connection attempt fails inside auto_complete_config, even to a port listening here."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        body = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)"
        (problem,) = validate_path(_model(tmp_path, body)).errors
    assert problem.field == "backend"
    assert problem.message.startswith("OSError: network access is disabled while validating")


def test_time_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A function that does not return is stopped at the limit, and says so."""
    monkeypatch.setattr(triton_rules_autocomplete, "TIME_LIMIT_S", 1.0)
    (problem,) = validate_path(_model(tmp_path, "import time\ntime.sleep(60)")).errors
    assert problem.message == "auto_complete_config of model 'm' did not return within 1 s (stopped)"


def test_runs_in_its_own_process_with_the_distributions_utils(tmp_path: Path) -> None:
    """The answer comes from another process (its pid), using the installed Triton's pb_utils."""
    body = (
        'config.add_input({"name": str(os.getpid()), "data_type": "TYPE_FP32", "dims": [1]})\n'
        'config.add_output({"name": pb_utils.__file__, "data_type": "TYPE_FP32", "dims": [1]})'
    )
    config = mc.ModelConfig(name="m", backend="python")
    completion = triton_rules_autocomplete.complete(config, _model(tmp_path, body) / "1")
    assert completion.findings == ()
    assert completion.config.input[0].name != str(os.getpid())
    utils = Path(completion.config.output[0].name)
    assert utils.name == "triton_python_backend_utils.py" and "tritonserver" in str(utils)


def test_edits_are_judged_without_running_model_code(tmp_path: Path) -> None:
    """The console judges each keystroke with auto_complete off: the model's code is not run, the rest is."""
    folder = _model(tmp_path, "raise ValueError('ran')")
    config = (folder / "config.pbtxt").read_text(encoding="utf-8")
    ran = validate_config_text(config, str(folder / "config.pbtxt"), folder)
    assert [p.message for p in ran.errors] == ["ValueError: ran"]
    edit = validate_config_text(config + "max_batch_size: -1\n", str(folder / "config.pbtxt"), folder,
                                auto_complete=False)
    assert [p.field for p in edit.errors] == ["max_batch_size"]
