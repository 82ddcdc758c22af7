"""Run inside the subprocess `rules.triton_autocomplete` starts, as Python's sitecustomize: do what the Python
backend stub does for auto-complete (pb_stub.cc AutoCompleteModelConfig) and write the outcome as JSON.

argv[1] is <model>/<version>/model.py, as the stub's is (the glue reads its model folder from it). The code
to load, the config JSON and the result file come in environment variables. The network is cut off first.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys
import traceback
from typing import Any, NoReturn

CODE_ENV = "GE_AUTOCOMPLETE_CODE"
CONFIG_ENV = "GE_AUTOCOMPLETE_CONFIG"
RESULT_ENV = "GE_AUTOCOMPLETE_RESULT"
NAME_ENV = "GE_AUTOCOMPLETE_MODEL"


def _no_network(*_args: Any, **_kwargs: Any) -> NoReturn:
    """Refuse every connection, bind and name lookup: validation is offline."""
    raise OSError("network access is disabled while validating (auto_complete_config runs offline)")


def _cut_network() -> None:
    """Replace the socket entry points the standard library and most clients use."""
    for name in ("connect", "connect_ex", "bind", "sendto"):
        setattr(socket.socket, name, _no_network)
    socket.getaddrinfo = _no_network  # type: ignore[assignment]
    socket.create_connection = _no_network  # type: ignore[assignment]


def _complete(code_path: str, config_json: str, model_name: str) -> dict[str, Any]:
    """Load the model's code and call TritonPythonModel.auto_complete_config as the stub does."""
    import triton_python_backend_utils as pb_utils

    spec = importlib.util.spec_from_file_location("model", code_path)
    if spec is None or spec.loader is None:
        return {"error": f"cannot load {code_path}"}
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.TritonPythonModel
    config = pb_utils.ModelConfig(config_json)
    if hasattr(model, "auto_complete_config"):
        config = model.auto_complete_config(config)
    if not isinstance(config, pb_utils.ModelConfig):
        return {
            "error": f"auto_complete_config function in model '{model_name}' must return a valid "
            "pb.ModelConfig object."
        }
    return {"config": config._model_config}


def main() -> None:
    """Complete the config, write the outcome, and leave before the interpreter runs argv[1]."""
    result_path = os.environ.pop(RESULT_ENV)
    _cut_network()
    try:
        outcome = _complete(os.environ[CODE_ENV], os.environ[CONFIG_ENV], os.environ[NAME_ENV])
    except Exception as exc:  # the stub reports any exception of the model's code
        outcome = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    with open(result_path, "w", encoding="utf-8") as handle:
        json.dump(outcome, handle)
    sys.stdout.flush()
    os._exit(0)


if os.environ.get(RESULT_ENV):
    main()
