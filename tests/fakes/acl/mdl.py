"""acl.mdl: load a fake OM, describe it, datasets, dynamic batch gears, synchronous execute.

Output names are those of an OM that ATC built from ONNX: `opName:edgeIndex:outputName` (e.g.
`Gemm_0:0:y`), the producing node, its output index, and the graph output's name; an OM spec's
"output_names" overrides them (an OM built with --out_nodes, or from another framework). With batch
gears, `get_output_dims` gives each output at the largest gear (not -1), and `get_cur_output_dims` at
the gear last set by `set_dynamic_batch_size` (as acl_net.py / acllite_model.py read them).
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path
from typing import Any

import numpy as np

from . import _state
from ._state import (
    ACL_ERROR_GE_EXEC_LOAD_WEIGHT_PARTITION_FAILED,
    ACL_ERROR_GE_PARAM_INVALID,
    ACL_ERROR_INVALID_FILE,
    ACL_ERROR_INVALID_MODEL_ID,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
    ACL_ERROR_MODEL_NOT_DYNAMIC,
    ACL_ERROR_PARSE_FILE,
    ACL_ERROR_RT_CONTEXT_NULL,
    ACL_SUCCESS,
)

MBATCH_INPUT = "ascend_mbatch_shape_data"
# aclDataType codes
_ACL_TYPES = {np.dtype(t): code for t, code in (
    (np.float32, 0), (np.float16, 1), (np.int8, 2), (np.int32, 3), (np.uint8, 4), (np.int16, 6),
    (np.uint16, 7), (np.uint32, 8), (np.int64, 9), (np.uint64, 10), (np.float64, 11), (np.bool_, 12))}
_ORT_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int8)": np.int8,
              "tensor(int32)": np.int32, "tensor(uint8)": np.uint8, "tensor(int64)": np.int64,
              "tensor(double)": np.float64, "tensor(bool)": np.bool_}


def _read_om(path: Path) -> dict[str, Any] | None:
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return spec if isinstance(spec, dict) and spec.get("fake_om") == 1 else None


def _tensor(name: str, dtype: Any, dims: list[int], batch: int) -> dict[str, Any]:
    np_dtype = np.dtype(dtype)
    size = int(np.prod([batch if d == -1 else d for d in dims])) * np_dtype.itemsize
    return {"name": name, "dtype": np_dtype, "dims": dims, "size": size, "acl_type": _ACL_TYPES[np_dtype]}


def _output_names(spec: dict[str, Any], session: Any, onnx_path: Path) -> list[str]:
    """`opName:edgeIndex:outputName` per graph output, as ATC names an ONNX model's outputs."""
    if "output_names" in spec:
        return [str(n) for n in spec["output_names"]]
    import onnx

    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    producers = {}
    for number, node in enumerate(graph.node):
        for edge, produced in enumerate(node.output):
            producers[produced] = (node.name or f"{node.op_type}_{number}", edge)
    names = []
    for output in session.get_outputs():
        op_name, edge = producers.get(output.name, (output.name, 0))
        names.append(f"{op_name}:{edge}:{output.name}")
    return names


def _trial(session: Any, shapes: dict[str, Any], batch: int) -> tuple[list[dict[str, Any]], list[Any]]:
    """Inputs at this batch, and the outputs one run gives for them."""
    inputs, feeds = [], {}
    for node in session.get_inputs():
        rest = shapes.get(node.name, [d if isinstance(d, int) else 1 for d in node.shape])[1:]
        dims = [batch, *[int(d) for d in rest]]
        inputs.append(_tensor(node.name, _ORT_TYPES[node.type], dims, batch))
        feeds[node.name] = np.zeros(dims, dtype=_ORT_TYPES[node.type])
    return inputs, session.run(None, feeds)


def _build(spec: dict[str, Any], om_path: Path, context: int) -> _state.Model:
    """Describe the OM: input dims from input_shape (batch -1 with gears), outputs by a run per gear."""
    import onnxruntime as ort

    onnx_path = om_path.parent / spec["onnx"]
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    gears = sorted(int(g) for g in spec.get("dynamic_batch", []))
    batch = gears[-1] if gears else int(spec.get("static_batch", 1))
    shapes = spec.get("input_shape", {})
    inputs, results = _trial(session, shapes, batch)
    if gears:
        for tensor in inputs:
            tensor["dims"] = [-1, *tensor["dims"][1:]]
    names = _output_names(spec, session, onnx_path)
    outputs = [_tensor(name, r.dtype, list(r.shape), 1) for name, r in zip(names, results, strict=True)]
    output_dims = {gear: [list(r.shape) for r in _trial(session, shapes, gear)[1]] for gear in gears}
    if gears:
        inputs.append(_tensor(MBATCH_INPUT, np.int64, [1], 1))
    model = _state.Model(session, context, _state.STATE.contexts[context], inputs, outputs, gears,
                         onnx_path.stat().st_size)
    model.output_dims = output_dims
    return model


def _load_error(spec: dict[str, Any]) -> int:
    """GE's refusal of an OM: built for another SoC, or damaged (spec "damaged": true)."""
    soc = spec.get("soc_version")
    if soc is not None and soc != _state.PROFILE.soc:
        return ACL_ERROR_GE_PARAM_INVALID  # logged as "Model soc version is not support in this device"
    if spec.get("damaged"):
        return ACL_ERROR_GE_EXEC_LOAD_WEIGHT_PARTITION_FAILED
    return ACL_SUCCESS


def load_from_file(model_path: str) -> tuple[int, int]:
    """aclmdlLoadFromFile into the current context: (model_id, ret)."""
    with _state.LOCK:
        _state.STATE.calls["mdl.load_from_file"] += 1
        context = _state.current_context()
        if context is None or context not in _state.STATE.contexts:
            return 0, ACL_ERROR_RT_CONTEXT_NULL
        path = Path(model_path)
        if not path.is_file():
            return 0, ACL_ERROR_INVALID_FILE
        spec = _read_om(path)
        if spec is None:
            return 0, ACL_ERROR_PARSE_FILE
        refused = _load_error(spec)
        if refused:
            return 0, refused
        model_id = _state.new_handle()
        _state.STATE.models[model_id] = _build(spec, path, context)
        return model_id, ACL_SUCCESS


def query_size(model_path: str) -> tuple[int, int, int]:
    """aclmdlQuerySize: (work_size, weight_size, ret)."""
    path = Path(model_path)
    spec = _read_om(path) if path.is_file() else None
    if spec is None:
        return 0, 0, ACL_ERROR_INVALID_FILE
    return 1 << 20, (path.parent / spec["onnx"]).stat().st_size, ACL_SUCCESS


def unload(model_id: int) -> int:
    """aclmdlUnload."""
    with _state.LOCK:
        if _state.STATE.models.pop(model_id, None) is None:
            return ACL_ERROR_INVALID_MODEL_ID
        return ACL_SUCCESS


def create_desc() -> int:
    """aclmdlCreateDesc."""
    with _state.LOCK:
        desc = _state.new_handle()
        _state.STATE.descs[desc] = None
        return desc


def get_desc(model_desc: int, model_id: int) -> int:
    """aclmdlGetDesc: fill the description of a loaded model."""
    with _state.LOCK:
        if model_desc not in _state.STATE.descs:
            return ACL_ERROR_INVALID_PARAM
        if model_id not in _state.STATE.models:
            return ACL_ERROR_INVALID_MODEL_ID
        _state.STATE.descs[model_desc] = model_id
        _DESC_MODELS[model_desc] = _state.STATE.models[model_id]
        return ACL_SUCCESS


_DESC_MODELS: dict[int, _state.Model] = {}


def destroy_desc(model_desc: int) -> int:
    """aclmdlDestroyDesc."""
    with _state.LOCK:
        if model_desc not in _state.STATE.descs:
            return ACL_ERROR_INVALID_PARAM
        del _state.STATE.descs[model_desc]
        _DESC_MODELS.pop(model_desc, None)
        return ACL_SUCCESS


def _side(desc: int, side: str) -> list[dict[str, Any]]:
    model = _DESC_MODELS.get(desc)
    return [] if model is None else (model.inputs if side == "in" else model.outputs)


def get_num_inputs(model_desc: int) -> int:
    return len(_side(model_desc, "in"))


def get_num_outputs(model_desc: int) -> int:
    return len(_side(model_desc, "out"))


def _at(desc: int, side: str, index: int) -> dict[str, Any] | None:
    tensors = _side(desc, side)
    return tensors[index] if 0 <= index < len(tensors) else None


def get_input_size_by_index(model_desc: int, index: int) -> int:
    return (_at(model_desc, "in", index) or {"size": 0})["size"]


def get_output_size_by_index(model_desc: int, index: int) -> int:
    return (_at(model_desc, "out", index) or {"size": 0})["size"]


def _dims(desc: int, side: str, index: int) -> tuple[dict[str, Any], int]:
    tensor = _at(desc, side, index)
    if tensor is None:
        return {}, ACL_ERROR_INVALID_PARAM
    dims = list(tensor["dims"])
    return {"name": tensor["name"], "dimCount": len(dims), "dims": dims}, ACL_SUCCESS


def get_input_dims(model_desc: int, index: int) -> tuple[dict[str, Any], int]:
    """aclmdlGetInputDims: ({"name", "dimCount", "dims"}, ret); the batch dim is -1 with gears."""
    return _dims(model_desc, "in", index)


def get_output_dims(model_desc: int, index: int) -> tuple[dict[str, Any], int]:
    """aclmdlGetOutputDims: with batch gears, the dims at the largest gear (no -1)."""
    return _dims(model_desc, "out", index)


def get_cur_output_dims(model_desc: int, index: int) -> tuple[dict[str, Any], int]:
    """aclmdlGetCurOutputDims: the dims at the gear last set by set_dynamic_batch_size."""
    found, ret = _dims(model_desc, "out", index)
    model = _DESC_MODELS.get(model_desc)
    if ret != ACL_SUCCESS or model is None or model.current_gear is None:
        return found, ret
    dims = model.output_dims[model.current_gear][index]
    return {"name": found["name"], "dimCount": len(dims), "dims": list(dims)}, ACL_SUCCESS


def get_input_name_by_index(model_desc: int, index: int) -> str:
    return (_at(model_desc, "in", index) or {"name": ""})["name"]


def get_output_name_by_index(model_desc: int, index: int) -> str:
    return (_at(model_desc, "out", index) or {"name": ""})["name"]


def get_input_data_type(model_desc: int, index: int) -> int:
    return (_at(model_desc, "in", index) or {"acl_type": -1})["acl_type"]


def get_output_data_type(model_desc: int, index: int) -> int:
    return (_at(model_desc, "out", index) or {"acl_type": -1})["acl_type"]


def get_input_index_by_name(model_desc: int, name: str) -> tuple[int, int]:
    """aclmdlGetInputIndexByName: (index, ret)."""
    for index, tensor in enumerate(_side(model_desc, "in")):
        if tensor["name"] == name:
            return index, ACL_SUCCESS
    return 0, ACL_ERROR_INVALID_PARAM


def get_dynamic_batch(model_desc: int) -> tuple[dict[str, Any], int]:
    """aclmdlGetDynamicBatch: ({"batchCount", "batch"}, ret); batchCount 0 for a static OM."""
    model = _DESC_MODELS.get(model_desc)
    if model is None:
        return {}, ACL_ERROR_INVALID_PARAM
    return {"batchCount": len(model.gears), "batch": list(model.gears)}, ACL_SUCCESS


def create_dataset() -> int:
    with _state.LOCK:
        handle = _state.new_handle()
        _state.STATE.datasets[handle] = _state.Dataset()
        return handle


def add_dataset_buffer(dataset: int, data_buffer: int) -> tuple[int, int]:
    """aclmdlAddDatasetBuffer: (dataset, ret)."""
    with _state.LOCK:
        if dataset not in _state.STATE.datasets or data_buffer not in _state.STATE.data_buffers:
            return dataset, ACL_ERROR_INVALID_PARAM
        _state.STATE.datasets[dataset].buffers.append(data_buffer)
        return dataset, ACL_SUCCESS


def get_dataset_num_buffers(dataset: int) -> int:
    found = _state.STATE.datasets.get(dataset)
    return 0 if found is None else len(found.buffers)


def get_dataset_buffer(dataset: int, index: int) -> int:
    found = _state.STATE.datasets.get(dataset)
    return found.buffers[index] if found is not None and 0 <= index < len(found.buffers) else 0


def destroy_dataset(dataset: int) -> int:
    """aclmdlDestroyDataset (its data buffers must be destroyed separately)."""
    with _state.LOCK:
        if _state.STATE.datasets.pop(dataset, None) is None:
            return ACL_ERROR_INVALID_PARAM
        return ACL_SUCCESS


def set_dynamic_batch_size(model_id: int, dataset: int, index: int, batch_size: int) -> int:
    """aclmdlSetDynamicBatchSize: choose one of the OM's gears for the next execute with this dataset."""
    with _state.LOCK:
        model = _state.STATE.models.get(model_id)
        if model is None:
            return ACL_ERROR_INVALID_MODEL_ID
        if not model.gears:
            return ACL_ERROR_MODEL_NOT_DYNAMIC
        found = _state.STATE.datasets.get(dataset)
        mbatch = len(model.inputs) - 1
        if found is None or index != mbatch or batch_size not in model.gears:
            return ACL_ERROR_INVALID_PARAM
        found.dynamic_batch = batch_size
        model.current_gear = batch_size
        return ACL_SUCCESS


def _buffers(dataset: int, tensors: list[dict[str, Any]]) -> list[tuple[int, int]] | None:
    found = _state.STATE.datasets.get(dataset)
    if found is None or len(found.buffers) != len(tensors):
        return None
    pairs = [_state.STATE.data_buffers.get(b) for b in found.buffers]
    if any(p is None or p[0] not in _state.STATE.allocs or p[1] < t["size"]
           for p, t in zip(pairs, tensors, strict=True)):
        return None
    return pairs  # type: ignore[return-value]


def execute(model_id: int, input_dataset: int, output_dataset: int) -> int:
    """aclmdlExecute (synchronous), in the model's context, reading and writing device memory."""
    with _state.LOCK:
        _state.STATE.calls["mdl.execute"] += 1
        model = _state.STATE.models.get(model_id)
        if model is None:
            return ACL_ERROR_INVALID_MODEL_ID
        if _state.current_context() != model.context:
            return ACL_ERROR_RT_CONTEXT_NULL
        ins, outs = _buffers(input_dataset, model.inputs), _buffers(output_dataset, model.outputs)
        if ins is None or outs is None:
            return ACL_ERROR_MODEL_INPUT_NOT_MATCH
        batch = _state.STATE.datasets[input_dataset].dynamic_batch if model.gears else None
        if model.gears and batch is None:
            return ACL_ERROR_INVALID_PARAM
        feeds = {}
        for tensor, (ptr, _) in zip(model.inputs, ins, strict=True):
            if tensor["name"] == MBATCH_INPUT:
                continue
            shape = [batch if d == -1 else d for d in tensor["dims"]]
            count = int(np.prod(shape)) * tensor["dtype"].itemsize
            raw = ctypes.string_at(ptr, count)
            feeds[tensor["name"]] = np.frombuffer(raw, tensor["dtype"]).reshape(shape)
        results = model.session.run(None, feeds)
        for result, (ptr, _) in zip(results, outs, strict=True):
            data = np.ascontiguousarray(result).tobytes()
            ctypes.memmove(ptr, data, len(data))
        _state.STATE.busy_executions[model.device] += 1
        return ACL_SUCCESS
