"""Open the right executor for a model instance and check its config against the real model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from triton_ge_console.backend_glue.executor import TRITON_TO_NUMPY, Executor, TensorInfo
from triton_ge_console.backend_glue.settings import GlueConfigError, GlueSettings
from triton_ge_console.model_files.external_data import check_external_data


def _where(settings: GlueSettings) -> str:
    """How errors name the model and its config file."""
    return f"model {settings.model_name} ({settings.model_dir / 'config.pbtxt'})"


def io_bytes(config: dict[str, Any]) -> int:
    """I/O buffer bytes at max batch from the config (dynamic dims counted as 1): the emulated workspace."""
    batch = max(1, int(config.get("max_batch_size", 0) or 0))
    total = 0
    for tensor in [*config.get("input", []), *config.get("output", [])]:
        dtype = TRITON_TO_NUMPY.get(str(tensor.get("data_type", "")).removeprefix("TYPE_"))
        elements = int(np.prod([max(1, int(d)) for d in tensor.get("dims", [])] or [1]))
        total += batch * elements * (dtype.itemsize if dtype is not None else 4)
    return total


def open_executor(settings: GlueSettings, config: dict[str, Any]) -> Executor:
    """AclExecutor on an NPU, else OnnxRuntimeExecutor; a missing model file is a clear error."""
    if settings.mode == "npu":
        from triton_ge_console.backend_glue.acl_executor import AclExecutor

        assert settings.om_path is not None  # resolve_mode guarantees an existing OM for npu
        return AclExecutor(settings.om_path, settings.device_id)
    from triton_ge_console.backend_glue.onnx_executor import OnnxRuntimeExecutor

    onnx_path = settings.onnx_path
    if onnx_path is None:
        raise GlueConfigError(f"{_where(settings)}: no ONNX model for CPU emulation: no *.onnx in "
                              f"{settings.version_dir} and no onnx_model_path parameter")
    if not onnx_path.is_file():
        raise GlueConfigError(f"{_where(settings)}: ONNX model {onnx_path} does not exist")
    problems = check_external_data(onnx_path, settings.version_dir.parent)
    if problems:
        raise GlueConfigError(f"{_where(settings)}: {problems[0]}")
    return OnnxRuntimeExecutor(onnx_path, settings.intra_op_threads, settings.inter_op_threads,
                               io_bytes(config), spinning=settings.ort_spinning)


def _config_dims(tensor: dict[str, Any], batched: bool) -> tuple[int, ...]:
    """A config tensor's full dims as the model gets them (Triton's reshape applied), batch dim included."""
    shape = tensor["reshape"].get("shape", []) if "reshape" in tensor else tensor.get("dims", [])
    dims = tuple(int(d) for d in shape)
    return (-1, *dims) if batched else dims


def squeezed(info: TensorInfo, batched: bool) -> bool:
    """A model scalar served as dims [1]: the glue squeezes it on the way in and expands it on the way out
    (Triton has no scalar tensors and refuses an empty reshape without batching)."""
    return info.ranked and not info.dims and not batched


def batch_only(info: TensorInfo, batched: bool) -> bool:
    """A batching model's batch-only tensor (ONNX [N]): served as dims [1], with Triton's `reshape: []` when
    the config has it, else the glue squeezes it to [N] on the way in and expands it on the way out (a
    config written by hand or auto-completed: Triton's auto-complete API takes no reshape)."""
    return batched and info.ranked and info.dims == (-1,)


def glue_flattened(declared: Sequence[dict[str, Any]], actual: Sequence[TensorInfo],
                   batched: bool) -> list[str]:
    """The batch-only tensors the config declares as dims [1] without a reshape: the glue's to squeeze."""
    by_name = {t.name: t for t in actual}
    return [str(t.get("name")) for t in declared
            if (info := by_name.get(str(t.get("name")))) is not None and batch_only(info, batched)
            and _config_dims(t, batched) == (-1, 1)]


def _dims_compatible(config_dims: tuple[int, ...], model_dims: tuple[int, ...]) -> bool:
    """Same rank, and every fixed model dim is either matched or left variable (-1) in the config."""
    if len(config_dims) != len(model_dims):
        return False
    return all(m == -1 or c in (-1, m) for c, m in zip(config_dims, model_dims, strict=True))


def _check_side(where: str, side: str, declared: Sequence[dict[str, Any]], actual: Sequence[TensorInfo],
                batched: bool, source: str) -> None:
    """Every declared tensor exists in the model with the same type and compatible dims."""
    by_name = {t.name: t for t in actual}
    for index, tensor in enumerate(declared):
        name = str(tensor.get("name", ""))
        info = by_name.get(name)
        field = f"{side}[{index}]"
        if info is None:
            raise GlueConfigError(f"{where}: {field}.name {name!r}: {source} has no {side} of that name "
                                  f"(it has: {', '.join(by_name) or 'none'})")
        data_type = str(tensor.get("data_type", "")).removeprefix("TYPE_")
        if data_type != info.data_type:
            raise GlueConfigError(f"{where}: {field}.data_type TYPE_{data_type}: {source} has "
                                  f"TYPE_{info.data_type} for {name}")
        dims = _config_dims(tensor, batched)
        if not info.ranked or (squeezed(info, batched) and dims == (1,)) or (
                batch_only(info, batched) and dims == (-1, 1)):
            continue  # any rank; or a scalar or batch-only tensor the glue squeezes
        if not _dims_compatible(dims, info.dims):
            scalar = " (a scalar: declare dims [1], the glue squeezes it)" if squeezed(info, batched) else ""
            raise GlueConfigError(f"{where}: {field}.dims {list(dims)} (batch dim included): {source} has "
                                  f"{list(info.dims)} for {name}{scalar}")


def match_outputs_by_index(declared: Sequence[dict[str, Any]], executor: Executor) -> bool:
    """An OM whose output names cannot match the config's (renamed by ATC, --out_nodes, another
    framework) takes the config's names by position, when it has exactly as many outputs; True if so."""
    names = [str(t.get("name", "")) for t in declared]
    actual = {o.name for o in executor.outputs}
    rename = getattr(executor, "rename_outputs", None)
    if rename is None or not names or set(names) <= actual or len(names) != len(executor.outputs):
        return False
    rename(names)
    return True


def declared_defaults(config: dict[str, Any], executor: Executor) -> tuple[TensorInfo, ...]:
    """The model's inputs with defaults (ONNX initializers) that the config declares: requests may send
    them to override the default (as Triton's onnxruntime backend serves them)."""
    declared = {str(t.get("name")) for t in config.get("input", [])}
    return tuple(d for d in getattr(executor, "defaults", ()) if d.name in declared)


def check_config_against_model(settings: GlueSettings, config: dict[str, Any], executor: Executor) -> None:
    """Refuse to serve a config that contradicts the model file (names, types, dims, missing inputs)."""
    where = _where(settings)
    source = str(settings.om_path if settings.mode == "npu" else settings.onnx_path)
    batched = settings.max_batch_size > 0
    declared_inputs = config.get("input", [])
    defaults = declared_defaults(config, executor)
    if defaults and batched:
        raise GlueConfigError(f"{where}: input {defaults[0].name}: a default of {source} (an initializer) "
                              "can be overridden only without batching (max_batch_size: 0)")
    _check_side(where, "input", declared_inputs, (*executor.inputs, *defaults), batched, source)
    if settings.mode == "npu":
        match_outputs_by_index(config.get("output", []), executor)
    _check_side(where, "output", config.get("output", []), executor.outputs, batched, source)
    if executor.max_batch is not None and settings.max_batch_size > executor.max_batch:
        raise GlueConfigError(f"{where}: max_batch_size {settings.max_batch_size}: {source} takes at most "
                              f"{executor.max_batch} (its largest batch gear)")
    declared = {str(t.get("name")) for t in declared_inputs}
    missing = [i.name for i in executor.inputs if i.name not in declared]
    if missing:
        raise GlueConfigError(f"{where}: input: {source} also needs {', '.join(missing)}, "
                              "which the config does not declare")
