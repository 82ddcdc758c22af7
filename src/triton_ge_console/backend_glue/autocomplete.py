"""Fill a model config's missing inputs/outputs from its ONNX, as CANN's native npu_ge does.

Inside Triton, `auto_complete_config` only receives the config; the Python backend stub is started with
`<repo>/<model>/<version>/model.py` as its first argument, so the model's folder is read from
/proc/self/cmdline. Outside Triton (the session launcher, the validator), call `complete_npu_ge_config`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from triton_ge_console.backend_glue.executor import TensorInfo
from triton_ge_console.backend_glue.settings import first_onnx, parameter


def onnx_tensors(onnx_path: Path, max_batch_size: int) -> tuple[list[TensorInfo], list[TensorInfo]]:
    """Graph inputs (initializers excluded) and outputs of an ONNX file with the dims a config gives them
    (model_files.onnx_io.for_config: the one mapping, scalars as [1] included)."""
    from triton_ge_console.model_files.onnx_io import for_config, read_onnx_io

    def info(tensor: Any) -> TensorInfo:
        served = for_config(tensor, max_batch_size)
        return TensorInfo(served.name, served.data_type, served.dims)

    inputs, outputs = read_onnx_io(onnx_path)
    return [info(t) for t in inputs], [info(t) for t in outputs]


def model_onnx(config: dict[str, Any], version_dir: Path) -> Path | None:
    """The ONNX a config runs: onnx_model_path (relative to the version folder) or the first *.onnx."""
    explicit = parameter(config, "onnx_model_path")
    if explicit:
        path = Path(explicit)
        return path if path.is_absolute() else version_dir / path
    return first_onnx(version_dir)


def missing_io(config: dict[str, Any], version_dir: Path) -> tuple[list[TensorInfo], list[TensorInfo]]:
    """The inputs and outputs (config dims) to add: all of a side the config leaves empty, else none."""
    want_inputs, want_outputs = not config.get("input"), not config.get("output")
    if not (want_inputs or want_outputs):
        return [], []
    onnx_path = model_onnx(config, version_dir)
    if onnx_path is None or not onnx_path.is_file():
        return [], []
    inputs, outputs = onnx_tensors(onnx_path, int(config.get("max_batch_size", 0) or 0))
    return (inputs if want_inputs else []), (outputs if want_outputs else [])


def stub_version_dir(cmdline: Path = Path("/proc/self/cmdline")) -> Path | None:
    """The version folder of the model this Python backend stub serves, from its argv[1]."""
    try:
        argv = cmdline.read_bytes().split(b"\0")
    except OSError:
        return None
    if len(argv) < 2 or not argv[1].endswith(b".py"):
        return None
    return Path(argv[1].decode(errors="replace")).parent


def auto_complete(auto_config: Any) -> Any:
    """Python-backend hook: add inputs/outputs read from the ONNX when the config has none."""
    version_dir = stub_version_dir()
    if version_dir is None:
        return auto_config
    inputs, outputs = missing_io(auto_config.as_dict(), version_dir)
    for info in inputs:
        auto_config.add_input(_tensor_dict(info))
    for info in outputs:
        auto_config.add_output(_tensor_dict(info))
    return auto_config


def _tensor_dict(info: TensorInfo) -> dict[str, Any]:
    """The dict form pb_utils.ModelConfig.add_input/add_output take."""
    return {"name": info.name, "data_type": f"TYPE_{info.data_type}", "dims": list(info.dims)}


def complete_npu_ge_config(config: Any, model_dir: Path) -> Any:
    """A copy of a ModelConfig (protobuf) with inputs/outputs filled from the newest version's ONNX."""
    from google.protobuf import json_format

    completed = type(config)()
    completed.CopyFrom(config)
    versions = sorted((p for p in Path(model_dir).iterdir() if p.is_dir() and p.name.isdigit()),
                      key=lambda p: int(p.name)) if Path(model_dir).is_dir() else []
    if not versions:
        return completed
    as_dict = json_format.MessageToDict(config, preserving_proto_field_name=True)
    inputs, outputs = missing_io(as_dict, versions[-1])
    for info in inputs:
        completed.input.add(name=info.name, data_type=f"TYPE_{info.data_type}", dims=list(info.dims))
    for info in outputs:
        completed.output.add(name=info.name, data_type=f"TYPE_{info.data_type}", dims=list(info.dims))
    return completed
