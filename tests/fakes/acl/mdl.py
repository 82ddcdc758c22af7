"""acl.mdl: load a fake OM, describe it, datasets, gears, dynamic shapes, AIPP, synchronous execute.

Output names are those of an OM that ATC built from ONNX: `opName:edgeIndex:outputName` (e.g.
`Gemm_0:0:y`), the producing node, its output index, and the graph output's name; an OM spec's
"output_names" overrides them (an OM built with --out_nodes, or from another framework). With batch
gears, `get_output_dims` gives each output at the largest gear (not -1), and `get_cur_output_dims` at
the gear last set by `set_dynamic_batch_size` (as acl_net.py / acllite_model.py read them).

The OM kinds ATC builds, each as AscendCL describes it (CANN AscendCL API reference; the binding's
signatures from hicann/runtime python/pyACL/mdl/mdl_wrap.cpp):
- "dynamic_batch" gears (--dynamic_batch_size): the batch axis is -1, `ascend_mbatch_shape_data` added
  (last, or at "mbatch_index").
- "dynamic_dims" (--dynamic_dims, one value per -1 of "input_shape" in each profile): -1 in the input
  dims, sizes at the largest profile, `ascend_mbatch_shape_data` added, `get_dynamic_batch` reports no
  gears; `get_input_dynamic_gear_count(desc, -1)` and `get_input_dynamic_dims(desc, -1, count)` give
  each profile as every input's full shape concatenated (aclmdlGetInputDynamicDims's example), and
  `set_input_dynamic_dims` takes exactly one of them.
- "dynamic_image_size" (--dynamic_image_size, H,W pairs): likewise, with `get_dynamic_hw(desc, -1)` and
  `set_dynamic_hw_size(model_id, dataset, index, h, w)`; each input's -1 axes are H then W.
- "dynamic_shape" (-1 or a ~ range without gears): input and output sizes are 0 (aclmdlGetInputSizeByIndex
  / GetOutputSizeByIndex: "the size may be 0 when the shape range is not fixed"), each input described
  with `set_dataset_tensor_desc` before execute; an output buffer created empty (ptr 0, size 0) is
  allocated by execute ("the system allocates it; the user frees it and resets the buffer with
  aclUpdateDataBuffer"), and each output's shape is read from `get_dataset_tensor_desc` after it.
- "aipp": "static" | "dynamic" (ATC --insert_op_conf): `get_aipp_type(model_id, index)` answers
  aclmdlInputAippType (ACL_DATA_WITH_STATIC_AIPP 1, ACL_DATA_WITH_DYNAMIC_AIPP 2, ACL_DYNAMIC_AIPP_NODE 3)
  and the attached input; a static YUV420SP AIPP input takes H*W*3/2 bytes, not what its dims say; a
  dynamic one adds the input `ascend_dynamic_aipp_data` (the name acl.mdl.set_input_aipp's reference gives
  the one dynamic AIPP input; ATC's guide calls it AippData).
An OM whose "soc_version" (the model attribute GE reads at load: hicann/ge base/common/helper/
om_file_helper.cc OmFileLoadHelper::CheckModelCompatibility) has another NpuArch than the card fails to load
with ACL_ERROR_GE_FAILURE (500002); one of the same NpuArch (Ascend910B3 on a 910B4) loads (_state.npu_arch).
"""

from __future__ import annotations

import ctypes
import json
import struct
import time
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import om_layout  # tests/fakes, beside this package

from . import _state
from ._state import (
    ACL_ERROR_GE_EXEC_LOAD_WEIGHT_PARTITION_FAILED,
    ACL_ERROR_GE_FAILURE,
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
MAX_TENSOR_NAME_LEN = 128  # acl_mdl.h ACL_MAX_TENSOR_NAME_LEN: aclmdlIODims.name's bytes
AIPP_INPUT = "ascend_dynamic_aipp_data"
AIPP_TYPES = {"static": 1, "dynamic": 2}  # aclmdlInputAippType of the data input
ACL_DYNAMIC_AIPP_NODE = 3
# aclDataType codes (CANN acl_base.h: ACL_FLOAT 0 ... ACL_BOOL 12, ACL_BF16 27)
_ACL_TYPES = {np.dtype(t): code for t, code in (
    (np.float32, 0), (np.float16, 1), (np.int8, 2), (np.int32, 3), (np.uint8, 4), (np.int16, 6),
    (np.uint16, 7), (np.uint32, 8), (np.int64, 9), (np.uint64, 10), (np.float64, 11), (np.bool_, 12),
    (ml_dtypes.bfloat16, 27))}
_ORT_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int8)": np.int8,
              "tensor(int32)": np.int32, "tensor(uint8)": np.uint8, "tensor(int64)": np.int64,
              "tensor(double)": np.float64, "tensor(bool)": np.bool_, "tensor(bfloat16)": ml_dtypes.bfloat16}
_BF16 = np.dtype(ml_dtypes.bfloat16)


def _ort_run(session: Any, feeds: dict[str, Any]) -> list[Any]:
    """session.run, with BF16 passed as typed OrtValues both ways (ORT's numpy bridge has no bfloat16):
    the device memory holds BF16 bits, as an OM's does."""
    import onnxruntime as ort

    if not any(o.type == "tensor(bfloat16)" for o in (*session.get_inputs(), *session.get_outputs())):
        return list(session.run(None, feeds))
    values = {name: ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(np.uint16), 16)
              if array.dtype == _BF16 else ort.OrtValue.ortvalue_from_numpy(array)
              for name, array in feeds.items()}
    results = session.run_with_ort_values([o.name for o in session.get_outputs()], values)
    return [np.frombuffer(ctypes.string_at(r.data_ptr(), 2 * int(np.prod(r.shape()))), _BF16)
            .reshape(r.shape()) if r.data_type() == "tensor(bfloat16)" else r.numpy() for r in results]


def _read_om(path: Path) -> dict[str, Any] | None:
    """The fake's description of an OM: from the TASK_INFO partition of one in GE's layout (the fake atc's),
    its SoC from the ModelDef's soc_version attribute as GE's CheckModelCompatibility reads it; or a plain
    JSON fake OM (tests' write_fake_om)."""
    try:
        laid_out = om_layout.read_om(path)
        if laid_out is not None:
            attrs, description = laid_out
            spec = json.loads(description.decode("utf-8"))
            if isinstance(spec, dict) and "soc_version" in attrs:
                spec["soc_version"] = attrs["soc_version"]
        else:
            spec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, struct.error, IndexError):
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
    return inputs, _ort_run(session, feeds)


def _build(spec: dict[str, Any], om_path: Path, context: int) -> _state.Model:
    """Describe the OM: inputs from input_shape, outputs by a run per gear or profile."""
    import onnxruntime as ort

    onnx_path = om_path.parent / spec["onnx"]
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    names = _output_names(spec, session, onnx_path)
    model = _state.Model(session, context, _state.STATE.contexts[context], [], [], [],
                         onnx_path.stat().st_size)
    if "dynamic_dims" in spec or "dynamic_image_size" in spec:
        _build_profiles(model, spec, names)
    elif spec.get("dynamic_shape"):
        _build_dynamic_shape(model, spec, names)
    else:
        _build_batch(model, spec, names)
    _build_aipp(model, spec)
    return model


def _build_batch(model: _state.Model, spec: dict[str, Any], names: list[str]) -> None:
    """A static OM, or batch gears: input dims from input_shape (batch -1 with gears)."""
    session = model.session
    gears = sorted(int(g) for g in spec.get("dynamic_batch", []))
    batch = gears[-1] if gears else int(spec.get("static_batch", 1))
    shapes = spec.get("input_shape", {})
    inputs, results = _trial(session, shapes, batch)
    if gears:
        for tensor in inputs:
            tensor["dims"] = [-1, *tensor["dims"][1:]]
    model.inputs = inputs
    model.outputs = [_tensor(name, r.dtype, list(r.shape), 1) for name, r in zip(names, results, strict=True)]
    model.output_dims = {gear: [list(r.shape) for r in _trial(session, shapes, gear)[1]] for gear in gears}
    model.gears = gears
    model.kind = "batch" if gears else "static"
    if gears:
        _place_mbatch(model, spec, _tensor(MBATCH_INPUT, np.int64, [1], 1))


def _place_mbatch(model: _state.Model, spec: dict[str, Any], tensor: dict[str, Any]) -> None:
    """Add ascend_mbatch_shape_data where the OM has it: last unless the OM spec's "mbatch_index" says
    otherwise. AscendCL fixes no position: its reference for aclmdlSetDynamicBatchSize /
    aclmdlSetInputDynamicDims has the caller find it with aclmdlGetInputIndexByName(ACL_DYNAMIC_TENSOR_NAME),
    and a dataset's buffers are matched to inputs by position (aclmdlAddDatasetBuffer, in input order)."""
    model.inputs.insert(int(spec.get("mbatch_index", len(model.inputs))), tensor)


def _base_shapes(spec: dict[str, Any], session: Any) -> list[tuple[str, Any, list[int]]]:
    """(name, dtype, dims) per input: input_shape's dims (-1 dynamic), else the ONNX's (symbols -1)."""
    shapes = spec.get("input_shape", {})
    return [(node.name, _ORT_TYPES[node.type],
             [int(d) for d in shapes.get(node.name, [d if isinstance(d, int) else -1 for d in node.shape])])
            for node in session.get_inputs()]


def _fill(dims: list[int], values: list[int]) -> list[int]:
    """dims with each -1 replaced by the next value."""
    it = iter(values)
    return [next(it) if d == -1 else d for d in dims]


def _build_profiles(model: _state.Model, spec: dict[str, Any], names: list[str]) -> None:
    """--dynamic_dims (values for every -1, in input order) or --dynamic_image_size (H,W per input)."""
    base = _base_shapes(spec, model.session)
    if "dynamic_dims" in spec:
        model.kind = "dims"
        for values in spec["dynamic_dims"]:
            it = iter(int(v) for v in values)
            model.profiles.append([[next(it) if d == -1 else d for d in dims] for _, _, dims in base])
    else:
        model.kind = "hw"
        model.hw = [[int(h), int(w)] for h, w in spec["dynamic_image_size"]]
        model.profiles = [[_fill(dims, [h, w] * 4) for _, _, dims in base] for h, w in model.hw]
    model.inputs = [_tensor(name, dtype, dims, 1) for name, dtype, dims in base]
    for index, tensor in enumerate(model.inputs):
        itemsize = tensor["dtype"].itemsize
        tensor["size"] = max(int(np.prod(p[index])) * itemsize for p in model.profiles)
    runs = [_run(model.session, [(n, t) for n, t, _ in base], p) for p in model.profiles]
    model.output_dims = {i: [list(r.shape) for r in results] for i, results in enumerate(runs)}
    largest = max(range(len(runs)), key=lambda i: sum(r.nbytes for r in runs[i]))
    model.outputs = [_tensor(name, r.dtype, list(r.shape), 1)
                     for name, r in zip(names, runs[largest], strict=True)]
    for index, tensor in enumerate(model.outputs):
        tensor["size"] = max(results[index].nbytes for results in runs)
    dynamic = sum(dims.count(-1) for _, _, dims in base)
    _place_mbatch(model, spec, _tensor(MBATCH_INPUT, np.int64, [dynamic if model.kind == "dims" else 2], 1))


def _run(session: Any, inputs: list[tuple[str, Any]], shapes: list[list[int]]) -> list[Any]:
    """One run on zeros of these shapes."""
    feeds = {name: np.zeros(shape, dtype=dtype) for (name, dtype), shape in zip(inputs, shapes, strict=True)}
    return _ort_run(session, feeds)


def _build_dynamic_shape(model: _state.Model, spec: dict[str, Any], names: list[str]) -> None:
    """A dynamic-shape OM: size 0 wherever a dim is -1 (inputs) or not known before a run (outputs)."""
    model.kind = "shape"
    model.inputs = [_tensor(name, dtype, dims, 1) for name, dtype, dims in _base_shapes(spec, model.session)]
    model.outputs = []
    for name, node in zip(names, model.session.get_outputs(), strict=True):
        dims = [d if isinstance(d, int) else -1 for d in node.shape]
        model.outputs.append(_tensor(name, _ORT_TYPES[node.type], dims, 1))
    for tensor in model.inputs + model.outputs:
        if -1 in tensor["dims"]:
            tensor["size"] = 0


def _build_aipp(model: _state.Model, spec: dict[str, Any]) -> None:
    """AIPP on the first input: static (a YUV420SP buffer of H*W*3/2 bytes) or dynamic (an extra input)."""
    model.aipp = [(0, 0)] * len(model.inputs)
    kind = spec.get("aipp")
    if kind is None:
        return
    if kind == "dynamic":
        model.inputs.append(_tensor(AIPP_INPUT, np.uint8, [1, 256], 1))
        model.aipp = [(AIPP_TYPES[kind], len(model.inputs) - 1), *model.aipp[1:], (ACL_DYNAMIC_AIPP_NODE, 0)]
        return
    height, width = model.inputs[0]["dims"][-2:]
    model.inputs[0]["size"] = height * width * 3 // 2
    model.aipp[0] = (AIPP_TYPES[kind], 0)


def _load_error(spec: dict[str, Any]) -> int:
    """GE's refusal of an OM: built for another NpuArch (500002), or damaged (spec "damaged": true)."""
    soc = spec.get("soc_version")
    if soc is not None and _state.npu_arch(soc) != _state.npu_arch(_state.PROFILE.soc):
        return ACL_ERROR_GE_FAILURE  # the plog: "soc version ... is not support in this device"
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
        model = _state.STATE.models[model_id] = _build(spec, path, context)
        # the load takes device memory for the weights and a static OM's working memory
        model.held = [_state.allocate(size, model.device, context)
                      for size in (model.weight_size, _work_size(spec)) if size]
        if "execute_ms" in spec:
            _state.STATE.models[model_id].execute_s = float(spec["execute_ms"]) / 1000.0
        return model_id, ACL_SUCCESS


WORK_SIZE = 1 << 20  # the working memory a static OM's load takes (a dynamic-shape one's comes per execution)


def query_size(model_path: str) -> tuple[int, int, int]:
    """aclmdlQuerySize: (work_size, weight_size, ret); a dynamic-shape OM answers work size 0 with success
    (hicann/ge runtime/v1/graph/load/model_manager/model_manager.cc GetModelMemAndWeightSize: "query size for
    dynamic model", its working memory being allocated at run time)."""
    path = Path(model_path)
    spec = _read_om(path) if path.is_file() else None
    if spec is None:
        return 0, 0, ACL_ERROR_INVALID_FILE
    return _work_size(spec), (path.parent / spec["onnx"]).stat().st_size, ACL_SUCCESS


def _work_size(spec: dict[str, Any]) -> int:
    return 0 if spec.get("dynamic_shape") else WORK_SIZE


def unload(model_id: int) -> int:
    """aclmdlUnload."""
    with _state.LOCK:
        model = _state.STATE.models.pop(model_id, None)
        if model is None:
            return ACL_ERROR_INVALID_MODEL_ID
        for ptr in model.held:
            _state.STATE.allocs.pop(ptr, None)
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
    return {"name": _dims_name(desc, side, index), "dimCount": len(dims), "dims": dims}, ACL_SUCCESS


def _dims_name(desc: int, side: str, index: int) -> str:
    """The name an aclmdlIODims carries: the tensor's own when it fits its 128-byte field
    (ACL_MAX_TENSOR_NAME_LEN, with the NUL), else `acl_modelId_<id>_input|output_<index>` (hicann/ge
    api/acl/acl_model/model/model_common.cpp GetTensorDescNameToDims / GetConvertTensorName);
    get_input_name_by_index and get_output_name_by_index give the full name (model_om2.cpp
    aclmdlGetNameByIndex), as get_tensor_real_name does from the converted one."""
    name = str((_at(desc, side, index) or {"name": ""})["name"])
    if len(name.encode()) + 1 <= MAX_TENSOR_NAME_LEN:
        return name
    return f"acl_modelId_{_state.STATE.descs.get(desc)}_{'input' if side == 'in' else 'output'}_{index}"


def get_tensor_real_name(model_desc: int, name: str) -> str:
    """aclmdlGetTensorRealName: a tensor's own name from itself or from its converted name (model_om2.cpp
    aclmdlGetTensorRealNameImplOm2); None (NULL) for a name the model has not."""
    for side in ("in", "out"):
        for index, tensor in enumerate(_side(model_desc, side)):
            if name in (tensor["name"], _dims_name(model_desc, side, index)):
                return str(tensor["name"])
    return None  # type: ignore[return-value]


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
    """aclmdlGetDynamicBatch: ({"batchCount", "batch"}, ret); batchCount 0 for a static OM; more than
    ACL_MAX_BATCH_NUM gears is ACL_ERROR_STORAGE_OVER_LIMIT (hicann/ge model_om2.cpp,
    aclmdlGetDynamicBatchImplOm2: "batch count[N] is larger than max batch num[128]")."""
    model = _DESC_MODELS.get(model_desc)
    if model is None:
        return {}, ACL_ERROR_INVALID_PARAM
    if len(model.gears) > _state.ACL_MAX_BATCH_NUM:
        return {}, _state.ACL_ERROR_STORAGE_OVER_LIMIT
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
    """aclmdlDestroyDataset (its data buffers must be destroyed separately; the output tensor
    descriptions execute attached go with it)."""
    with _state.LOCK:
        if _state.STATE.datasets.pop(dataset, None) is None:
            return ACL_ERROR_INVALID_PARAM
        for handle in [h for h, d in _state.STATE.tensor_descs.items() if d.owner == dataset]:
            del _state.STATE.tensor_descs[handle]
        return ACL_SUCCESS


def _mbatch_index(model: _state.Model) -> int:
    """Where ascend_mbatch_shape_data is (-1: the OM has no gears)."""
    return next((i for i, t in enumerate(model.inputs) if t["name"] == MBATCH_INPUT), -1)


def get_input_dynamic_gear_count(model_desc: int, index: int) -> tuple[int, int]:
    """aclmdlGetInputDynamicGearCount(desc, -1): (count, ret); 0 gears for an OM without --dynamic_dims."""
    model = _DESC_MODELS.get(model_desc)
    if model is None or index != -1:
        return 0, ACL_ERROR_INVALID_PARAM
    if model.kind == "dims" and len(model.profiles) > _state.ACL_MAX_DIM_CNT:  # aclmdlGetInputDynamicGear-
        return 0, _state.ACL_ERROR_STORAGE_OVER_LIMIT  # CountImplOm2: "dimCnt[N] is larger than max[128]"
    return (len(model.profiles) if model.kind == "dims" else 0), ACL_SUCCESS


def get_input_dynamic_dims(model_desc: int, index: int, gear_count: int) -> tuple[list[dict[str, Any]], int]:
    """aclmdlGetInputDynamicDims(desc, -1, count): each profile as every input's shape concatenated."""
    model = _DESC_MODELS.get(model_desc)
    if model is None or index != -1 or model.kind != "dims" or gear_count != len(model.profiles):
        return [], ACL_ERROR_INVALID_PARAM
    if sum(len(shape) for shape in model.profiles[0]) > _state.ACL_MAX_DIM_CNT:  # aclmdlGetInputDynamic-
        return [], _state.ACL_ERROR_FAILURE  # DimsImplOm2: "current dynamic dims size N can not be larger"
    return [{"name": "", "dimCount": sum(len(s) for s in p), "dims": [d for s in p for d in s]}
            for p in model.profiles], ACL_SUCCESS


def _set_profile(model_id: int, dataset: int, index: int, kind: str, wanted: Any) -> int:
    """Choose one of the OM's profiles for the next execute with this dataset (it must be one exactly)."""
    with _state.LOCK:
        model = _state.STATE.models.get(model_id)
        if model is None:
            return ACL_ERROR_INVALID_MODEL_ID
        if model.kind != kind:
            return ACL_ERROR_MODEL_NOT_DYNAMIC
        found = _state.STATE.datasets.get(dataset)
        keys = ([[d for s in p for d in s] for p in model.profiles] if kind == "dims" else model.hw)
        if found is None or index != _mbatch_index(model) or wanted not in keys:
            return ACL_ERROR_INVALID_PARAM
        found.profile = model.current_gear = keys.index(wanted)
        return ACL_SUCCESS


def set_input_dynamic_dims(model_id: int, dataset: int, index: int, dims: dict[str, Any]) -> int:
    """aclmdlSetInputDynamicDims: dims {"name", "dimCount", "dims"}, every input's shape concatenated. Parsed
    as mdl_wrap.cpp's WrapAclMdlSetInputDynamicDims does: a dict (else TypeError), "dims" a list (not a
    tuple) of dimCount Python ints (PyLong_Type: numpy integers are refused); aclmdlSetInputDynamicDims
    answers ACL_ERROR_INVALID_PARAM for a dimCount of 0 (hicann/ge api/acl/acl_model/model/model.cpp)."""
    if not isinstance(dims, dict):
        raise TypeError("argument 4 is not dict")
    count, listed = dims.get("dimCount"), dims.get("dims")
    if not isinstance(count, int) or not isinstance(listed, list):
        raise TypeError("The dims of parameter 4 is not a list.")
    if len(listed) < count or not all(isinstance(d, int) for d in listed[:count]):
        raise TypeError("the dims of fourth parameter is not list of int")
    if count == 0:
        return ACL_ERROR_INVALID_PARAM
    return _set_profile(model_id, dataset, index, "dims", [int(d) for d in listed[:count]])


def get_dynamic_hw(model_desc: int, index: int) -> tuple[dict[str, Any], int]:
    """aclmdlGetDynamicHW(desc, -1): ({"hwCount", "hw": [[h, w], ...]}, ret); 0 for other OMs."""
    model = _DESC_MODELS.get(model_desc)
    if model is None:
        return {}, ACL_ERROR_INVALID_PARAM
    if len(model.hw) > _state.ACL_MAX_HW_NUM:  # aclmdlGetDynamicHWImplOm2: "hw count[N] is larger than max"
        return {}, _state.ACL_ERROR_STORAGE_OVER_LIMIT
    return {"hwCount": len(model.hw), "hw": [list(p) for p in model.hw]}, ACL_SUCCESS


def set_dynamic_hw_size(model_id: int, dataset: int, index: int, height: int, width: int) -> int:
    """aclmdlSetDynamicHWSize: one of the OM's H,W profiles."""
    return _set_profile(model_id, dataset, index, "hw", [int(height), int(width)])


def get_aipp_type(model_id: int, index: int) -> tuple[int, int, int]:
    """aclmdlGetAippType: (aclmdlInputAippType, dynamic attached data index, ret)."""
    model = _state.STATE.models.get(model_id)
    if model is None:
        return 0, 0, ACL_ERROR_INVALID_MODEL_ID
    if not 0 <= index < len(model.inputs):
        return 0, 0, ACL_ERROR_INVALID_PARAM
    aipp = model.aipp[index] if index < len(model.aipp) else (0, 0)
    return aipp[0], aipp[1], ACL_SUCCESS


def set_dataset_tensor_desc(dataset: int, tensor_desc: int, index: int) -> tuple[int, int]:
    """aclmdlSetDatasetTensorDesc: (dataset, ret); describes input `index` (its real shape) for execute, an
    index below the dataset's buffers only (model_om2.cpp aclmdlSetDatasetTensorDescImplOm2)."""
    with _state.LOCK:
        found = _state.STATE.datasets.get(dataset)
        described = found is not None and 0 <= index < len(found.buffers)
        if found is None or not described or tensor_desc not in _state.STATE.tensor_descs:
            return dataset, ACL_ERROR_INVALID_PARAM
        found.tensor_descs[index] = tensor_desc
        return dataset, ACL_SUCCESS


def get_dataset_tensor_desc(dataset: int, index: int) -> int:
    """aclmdlGetDatasetTensorDesc: the description at index (an output's real shape after execute), 0 if
    none."""
    found = _state.STATE.datasets.get(dataset)
    return 0 if found is None else found.tensor_descs.get(index, 0)


def set_dynamic_batch_size(model_id: int, dataset: int, index: int, batch_size: int) -> int:
    """aclmdlSetDynamicBatchSize: choose one of the OM's gears for the next execute with this dataset."""
    with _state.LOCK:
        model = _state.STATE.models.get(model_id)
        if model is None:
            return ACL_ERROR_INVALID_MODEL_ID
        if not model.gears:
            return ACL_ERROR_MODEL_NOT_DYNAMIC
        found = _state.STATE.datasets.get(dataset)
        if found is None or index != _mbatch_index(model) or batch_size not in model.gears:
            return ACL_ERROR_INVALID_PARAM
        found.dynamic_batch = batch_size
        model.current_gear = batch_size
        return ACL_SUCCESS


def _buffers(dataset: int, tensors: list[dict[str, Any]]) -> list[tuple[int, int]] | None:
    found = _state.STATE.datasets.get(dataset)
    if found is None or len(found.buffers) != len(tensors):
        return None
    pairs = [_state.STATE.data_buffers.get(b) for b in found.buffers]
    if any(p is None or (p[0] not in _state.STATE.allocs and p != (0, 0)) or p[1] < t["size"]
           for p, t in zip(pairs, tensors, strict=True)):
        return None
    return pairs  # type: ignore[return-value]


def _input_shapes(model: _state.Model, dataset: _state.Dataset) -> list[list[int]] | None:
    """Each input's shape for this execute: the gear's, the profile's, or its tensor description's."""
    if model.kind == "batch":
        batch = dataset.dynamic_batch
        return None if batch is None else [[batch if d == -1 else d for d in t["dims"]] for t in model.inputs]
    if model.kind in ("dims", "hw"):
        if dataset.profile is None:
            return None
        shapes = iter(model.profiles[dataset.profile])  # the data inputs' shapes, in input order
        return [list(t["dims"]) if t["name"] in (MBATCH_INPUT, AIPP_INPUT) else next(shapes)
                for t in model.inputs]
    if model.kind == "shape":
        shapes = []
        for index, tensor in enumerate(model.inputs):
            desc = _state.STATE.tensor_descs.get(dataset.tensor_descs.get(index, 0))
            if -1 in tensor["dims"] and desc is None:
                return None  # a dynamic input must be described (aclmdlSetDatasetTensorDesc)
            shapes.append(list(desc.dims) if desc is not None else list(tensor["dims"]))
        return shapes
    return [list(t["dims"]) for t in model.inputs]


def execute(model_id: int, input_dataset: int, output_dataset: int) -> int:
    """aclmdlExecute (synchronous), in the model's context, reading and writing device memory, holding the
    GIL throughout as pyACL's WrapAclMdlExecute does (mdl_wrap.cpp: it never releases it): ONNX Runtime
    computes the outputs (it lets the GIL go), then the device's time is spent in C with the GIL held: the
    OM spec's "execute_ms", else as long as ONNX Runtime took (`_state.hold_gil`)."""
    model = _state.STATE.models.get(model_id)
    device = model.device if model is not None else -1
    _state.STATE.in_flight[device] += 1
    started = time.perf_counter()
    try:
        ret = _execute(model_id, input_dataset, output_dataset)
        if ret == ACL_SUCCESS and model is not None:
            _state.hold_gil(model.execute_s if model.execute_s is not None else time.perf_counter() - started)
        return ret
    finally:
        _state.STATE.in_flight[device] -= 1


def _execute(model_id: int, input_dataset: int, output_dataset: int) -> int:
    """The execution's work."""
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
        shapes = _input_shapes(model, _state.STATE.datasets[input_dataset])
        if shapes is None:
            return ACL_ERROR_INVALID_PARAM
        feeds = {}
        for tensor, shape, (ptr, size) in zip(model.inputs, shapes, ins, strict=True):
            if tensor["name"] in (MBATCH_INPUT, AIPP_INPUT):
                continue
            count = int(np.prod(shape)) * tensor["dtype"].itemsize
            if count > size:
                return ACL_ERROR_MODEL_INPUT_NOT_MATCH
            raw = ctypes.string_at(ptr, count)
            feeds[tensor["name"]] = np.frombuffer(raw, tensor["dtype"]).reshape(shape)
        results = _ort_run(model.session, feeds)
        out_dataset = _state.STATE.datasets[output_dataset]
        for index, (result, (ptr, size)) in enumerate(zip(results, outs, strict=True)):
            data = np.ascontiguousarray(result).tobytes()
            if (ptr, size) == (0, 0):  # an empty buffer: the system allocates the output
                ptr = _state.allocate(len(data), model.device, model.context)
                _state.STATE.data_buffers[out_dataset.buffers[index]] = (ptr, len(data))
            elif len(data) > size:
                return ACL_ERROR_INVALID_PARAM  # the output does not fit the buffer given
            ctypes.memmove(ptr, data, len(data))
            if model.kind == "shape":
                _state.STATE.tensor_descs.pop(out_dataset.tensor_descs.get(index, 0), None)
                desc = _state.new_handle()
                _state.STATE.tensor_descs[desc] = _state.TensorDesc(
                    model.outputs[index]["acl_type"], list(result.shape), 2, owner=output_dataset)
                out_dataset.tensor_descs[index] = desc
        _state.STATE.busy_executions[model.device] += 1
        return ACL_SUCCESS
