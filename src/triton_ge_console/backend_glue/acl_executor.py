"""Run an Ascend offline model (.om) through AscendCL's Python API (`acl`, from CANN, imported lazily).

Per instance: set_device, create_context, load_from_file, a model description, and device buffers plus
datasets allocated once and reused. Per execution, under a lock: memcpy host→device, execute (sync),
memcpy device→host. Every OM shape ATC builds (CANN's AscendCL reference for each call named):
- batch gears (--dynamic_batch_size): the `ascend_mbatch_shape_data` input and `set_dynamic_batch_size`:
  a batch is padded to the next gear, each output read at the dims `get_cur_output_dims` gives for that
  gear, and what the gear padded sliced off;
- dimension gears (--dynamic_dims; `get_input_dynamic_gear_count` / `get_input_dynamic_dims`, each gear
  every input's shape concatenated) and image-size gears (--dynamic_image_size; `get_dynamic_hw`): the
  smallest gear holding the request (`set_input_dynamic_dims` / `set_dynamic_hw_size`), inputs padded
  with zeros to it, each output cut back on the axes that follow a dynamic input axis (found at load by
  comparing `get_cur_output_dims` across gears);
- dynamic shape (-1 or a range without gears, or an output shaped by the data; sizes 0): buffers
  allocated per request at the real size, each input described (`create_tensor_desc`,
  `set_dataset_tensor_desc`), outputs left to AscendCL to allocate (an empty data buffer) and read at the
  shape of `get_dataset_tensor_desc`;
- AIPP (static or dynamic, `get_aipp_type`): refused at load, saying why.

Supported: CANN 5.x to 8.x pyacl. Before CANN 6.0.1 pyacl has no `acl.util.bytes_to_ptr`/`ptr_to_bytes`
and the numpy pair is used (as Huawei's samples do); without `get_device_utilization_rate` utilization
comes from the glue's own busy time; on Ascend 310 cards (no HBM) memory is read as DDR.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from triton_ge_console.backend_glue.acl_codes import meaning
from triton_ge_console.backend_glue.executor import (
    TRITON_TO_NUMPY,
    DeviceFigures,
    ExecutorError,
    RunStats,
    TensorInfo,
)

ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_DDR_MEM = 0
ACL_HBM_MEM = 1
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_FORMAT_ND = 2  # aclFormat
AIPP_KINDS = {1: "static AIPP", 2: "dynamic AIPP", 3: "the dynamic AIPP parameters"}  # aclmdlInputAippType
DYNAMIC_BATCH_INPUT = "ascend_mbatch_shape_data"
VISIBLE_DEVICES = "ASCEND_RT_VISIBLE_DEVICES"
ACL_TYPES = {0: "FP32", 1: "FP16", 2: "INT8", 3: "INT32", 4: "UINT8", 6: "INT16", 7: "UINT16",
             8: "UINT32", 9: "INT64", 10: "UINT64", 11: "FP64", 12: "BOOL",
             27: "BF16"}  # CANN acl_base.h aclDataType: ACL_BF16 = 27
ACL_TYPE_CODES = {name: code for code, name in ACL_TYPES.items()}
# Teardown phases, run in this order: unload, desc, datasets and buffers, free, context, device.
UNLOAD, DESC, BUFFERS, DATASETS, FREE, CONTEXT, DEVICE = range(7)

_init_lock = threading.Lock()
_initialized = False


class AclError(ExecutorError):
    """A non-zero AscendCL return code, naming the call."""

    def __init__(self, call: str, code: int) -> None:
        super().__init__(f"{call} failed with ACL error {code}: {meaning(code)}")
        self.call = call
        self.code = code


def check(call: str, ret: int) -> None:
    """Raise AclError for any non-zero ret."""
    if ret != 0:
        raise AclError(call, int(ret))


def acl_init(acl: Any) -> None:
    """acl.init exactly once per process (a repeated init from someone else is fine); finalize at exit."""
    global _initialized
    with _init_lock:
        if _initialized:
            return
        ret = acl.init()
        if ret not in (0, ACL_ERROR_REPEAT_INITIALIZE):
            check("acl.init", ret)
        if ret == 0:
            atexit.register(acl.finalize)
        _initialized = True


def user_device_id(acl: Any, logical: int) -> int:
    """The id aclrtSetDevice takes for NPU `logical` (npu-smi's Chip Logic ID, what device_ids name): its
    place in ASCEND_RT_VISIBLE_DEVICES when that is set (CANN runtime reference, "user device ID"), asked
    of acl.rt.get_user_dev_id_by_logic_dev_id where pyACL has it (rt/pyrt_methods.cpp), else worked out."""
    convert = getattr(acl.rt, "get_user_dev_id_by_logic_dev_id", None)
    visible_text = os.environ.get(VISIBLE_DEVICES, "").strip()
    said = f"{VISIBLE_DEVICES}={visible_text}" if visible_text else f"{VISIBLE_DEVICES} unset"
    if convert is not None:
        user, ret = convert(logical)
        if ret != 0:
            raise ExecutorError(f"NPU {logical} (npu-smi's logical id) is not visible to this process "
                                f"({said}): acl.rt.get_user_dev_id_by_logic_dev_id answered ACL error {ret}")
        return int(user)
    if not visible_text:
        return logical
    visible = [int(part) for part in visible_text.split(",") if part.strip().lstrip("-").isdigit()]
    if logical not in visible:
        raise ExecutorError(f"NPU {logical} (npu-smi's logical id) is not visible to this process ({said})")
    return visible.index(logical)


def pick_gear(batch: int, gears: tuple[int, ...]) -> int:
    """The smallest gear holding batch."""
    for gear in gears:
        if gear >= batch:
            return gear
    raise ExecutorError(f"batch {batch} exceeds the OM's largest batch gear {gears[-1]}")


def tensor_name(om_name: str) -> str:
    """The graph's name of an OM output: ATC names ONNX outputs `opName:edgeIndex:outputName`."""
    parts = om_name.split(":", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2]:
        return parts[2]
    return om_name


def batch_axis(full: tuple[int, ...], smallest: tuple[int, ...], gears: tuple[int, ...]) -> int | None:
    """Which axis of an output follows the batch gear: where its dims at the largest and smallest differ."""
    if len(gears) == 1:  # nothing to compare: a leading dim equal to the gear is taken as the batch
        return 0 if full and full[0] == gears[0] else None
    for axis, (big, small) in enumerate(zip(full, smallest, strict=False)):
        if big != small:
            return axis
    return None


@dataclass(frozen=True)
class Profile:
    """One dimension or image-size gear: what sets it, and each data input's shape at it."""

    values: tuple[int, ...]  # set_input_dynamic_dims's dims (every shape concatenated), or (h, w)
    shapes: tuple[tuple[int, ...], ...]

    @property
    def elements(self) -> int:
        """How much the gear computes on: the elements of all its inputs."""
        return sum(int(np.prod(shape)) for shape in self.shapes)


def pick_profile(shapes: list[tuple[int, ...]], profiles: tuple[Profile, ...],
                 model_dims: list[tuple[int, ...]]) -> Profile:
    """The smallest gear holding every input: fixed axes equal, dynamic ones (-1 in the OM) at most the
    gear's."""
    def fits(profile: Profile) -> bool:
        return all(len(real) == len(gear) and all(r == g if m != -1 else r <= g
                                                  for r, g, m in zip(real, gear, dims, strict=True))
                   for real, gear, dims in zip(shapes, profile.shapes, model_dims, strict=True))

    fitting = [p for p in profiles if fits(p)]
    if not fitting:
        raise ExecutorError(f"input shapes {[list(s) for s in shapes]} fit none of the OM's gears "
                            f"{[[list(s) for s in p.shapes] for p in profiles]}")
    return min(fitting, key=lambda p: p.elements)


def pad_to(array: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """array with zeros after its data on every axis, up to shape (itself when it already is)."""
    if tuple(array.shape) == shape:
        return np.ascontiguousarray(array, dtype=dtype)
    padded = np.zeros(shape, dtype=dtype)
    padded[tuple(slice(0, n) for n in array.shape)] = array
    return padded


def follows(per_profile: list[int], profiles: tuple[Profile, ...], model_dims: list[tuple[int, ...]],
            axis: int) -> tuple[tuple[int, int], ...]:
    """The dynamic input axes (input, axis) whose size an output axis takes in every gear; where several
    do (square image gears: H and W alike), those at the output's own axis position."""
    found = tuple((i, a) for i, dims in enumerate(model_dims) for a, d in enumerate(dims)
                  if d == -1 and all(size == p.shapes[i][a] for size, p in zip(per_profile, profiles,
                                                                               strict=True)))
    aligned = tuple((i, a) for i, a in found if a == axis)
    return aligned if len(found) > 1 and aligned else found


def _bound(call: Callable[[Any], int], handle: Any) -> Callable[[], int]:
    """call(handle), for later."""
    return lambda: call(handle)


@dataclass
class _Slot:
    """One model input or output with its device buffer (and host staging buffer for outputs)."""

    info: TensorInfo
    dtype: np.dtype
    size: int  # bytes at the largest gear
    index: int = 0  # in the model description
    device_ptr: int = 0
    batch_axis: int | None = None  # outputs with gears: the axis a gear pads
    # outputs with dimension/image gears: per axis, the dynamic input axes it follows (() fixed); None for
    # an axis that varies with the gear but follows no input axis (then only exact gears run)
    follows: tuple[tuple[tuple[int, int], ...] | None, ...] = ()


class AclExecutor:
    """An OM on one NPU; the same interface as the ONNX Runtime executor."""

    kind = "npu"

    def __init__(self, om_path: Path, device_id: int) -> None:
        import acl  # CANN's pyacl: only present on an Ascend host

        self._acl = acl
        self.path = om_path
        self.device_id = device_id
        self._lock = threading.Lock()  # executions
        self._life = threading.Lock()  # open/closed: device_figures against close, never against run
        self._undo: list[tuple[int, str, Callable[[], int]]] = []
        self._closed = False
        self._device_s = 0.0  # the current run's time inside acl.mdl.execute
        self._load_bytes: int | None = None  # free device memory the load took, where AscendCL says
        try:
            self._open()
        except BaseException:
            with contextlib.suppress(ExecutorError):  # the original failure is the one worth reporting
                self.close()
            raise

    def _later(self, phase: int, call: str, action: Callable[[], int]) -> None:
        """Remember how to undo what was just created."""
        self._undo.append((phase, call, action))

    def _open(self) -> None:
        """Device, context, model, description, buffers and datasets."""
        acl = self._acl
        acl_init(acl)
        dev = self._user_id = user_device_id(acl, self.device_id)  # device_id stays npu-smi's, for figures
        check(f"acl.rt.set_device({dev})", acl.rt.set_device(dev))
        self._later(DEVICE, "acl.rt.reset_device", lambda: acl.rt.reset_device(dev))
        self._context, ret = acl.rt.create_context(dev)
        check("acl.rt.create_context", ret)
        self._later(CONTEXT, "acl.rt.destroy_context", lambda: acl.rt.destroy_context(self._context))
        free_before = self._free()
        self._model_id, ret = acl.mdl.load_from_file(str(self.path))
        check(f"acl.mdl.load_from_file({self.path})", ret)
        free_after = self._free()
        self._load_bytes = (free_before - free_after if free_before is not None and free_after is not None
                            and free_before > free_after else None)
        self._later(UNLOAD, "acl.mdl.unload", lambda: acl.mdl.unload(self._model_id))
        self._desc = acl.mdl.create_desc()
        if not self._desc:
            raise ExecutorError("acl.mdl.create_desc returned no description")
        self._later(DESC, "acl.mdl.destroy_desc", lambda: acl.mdl.destroy_desc(self._desc))
        check("acl.mdl.get_desc", acl.mdl.get_desc(self._desc, self._model_id))
        self._describe()
        self._refuse_aipp()
        if self.dynamic_shape:
            return  # datasets per request
        # in the OM's input order: buffers are matched to inputs by position, and ATC's gear input need not
        # be last (AscendCL has its index asked: aclmdlGetInputIndexByName(ACL_DYNAMIC_TENSOR_NAME))
        self._in_dataset = self._dataset(sorted(self._in_slots + self._mbatch_slots, key=lambda s: s.index),
                                         "input")
        self._out_dataset = self._dataset(self._out_slots, "output")
        self._find_batch_axes()
        self._find_profile_axes()

    def _refuse_aipp(self) -> None:
        """An OM with AIPP (ATC --insert_op_conf) takes image bytes (a static YUV input's buffer is not
        what its dims say), or AIPP parameters per request: not supported, said at load."""
        aipp_type = getattr(self._acl.mdl, "get_aipp_type", None)
        if aipp_type is None:
            return
        for index in range(self._acl.mdl.get_num_inputs(self._desc)):
            kind, _, ret = aipp_type(self._model_id, index)
            if ret == 0 and kind in AIPP_KINDS:
                name = self._acl.mdl.get_input_name_by_index(self._desc, index)
                raise ExecutorError(f"{self.path}: input {name} carries {AIPP_KINDS[kind]} (ATC "
                                    "--insert_op_conf): the glue does not support AIPP models yet; convert "
                                    "the model without --insert_op_conf and preprocess in the client")

    def _find_profile_axes(self) -> None:
        """Which output axes follow which dynamic input axes: their dims at each gear, compared."""
        if not self.profiles:
            return
        per_output: list[list[tuple[int, ...]]] = [[] for _ in self._out_slots]
        for profile in self.profiles:
            self._set_profile(profile)
            for dims, slot in zip(per_output, self._out_slots, strict=True):
                dims.append(self._cur_dims(slot))
        model_dims = [s.info.dims for s in self._in_slots]
        infos = []
        for dims, slot in zip(per_output, self._out_slots, strict=True):
            axes: list[tuple[tuple[int, int], ...] | None] = []
            for axis in range(len(dims[0])):
                sizes = [d[axis] for d in dims]
                found = follows(sizes, self.profiles, model_dims, axis)
                axes.append(() if len(set(sizes)) == 1 else (found or None))
            slot.follows = tuple(axes)
            shown = tuple(d if a == () else -1 for a, d in zip(slot.follows, slot.info.dims, strict=True))
            slot.info = TensorInfo(slot.info.name, slot.info.data_type, shown)
            infos.append(slot.info)
        self.outputs = tuple(infos)

    def _set_profile(self, profile: Profile) -> None:
        """Make this gear current for the next execution with the input dataset."""
        mdl = self._acl.mdl
        if self._profile_kind == "dims":
            dims = {"dimCount": len(profile.values), "name": "", "dims": list(profile.values)}
            check(f"acl.mdl.set_input_dynamic_dims({list(profile.values)})", mdl.set_input_dynamic_dims(
                self._model_id, self._in_dataset, self._mbatch_index, dims))
        else:
            height, width = profile.values
            check(f"acl.mdl.set_dynamic_hw_size({height}, {width})", mdl.set_dynamic_hw_size(
                self._model_id, self._in_dataset, self._mbatch_index, height, width))

    def _find_batch_axes(self) -> None:
        """Which axis of each output the gear pads: its dims at the smallest gear against the largest."""
        if not self.gears:
            return
        acl = self._acl
        check(f"acl.mdl.set_dynamic_batch_size({self.gears[0]})", acl.mdl.set_dynamic_batch_size(
            self._model_id, self._in_dataset, self._mbatch_index, self.gears[0]))
        infos = []
        for slot in self._out_slots:
            small = self._cur_dims(slot)
            slot.batch_axis = batch_axis(slot.info.dims, small, self.gears)
            dims = list(slot.info.dims)
            if slot.batch_axis is not None:
                dims[slot.batch_axis] = -1
            slot.info = TensorInfo(slot.info.name, slot.info.data_type, tuple(dims))
            infos.append(slot.info)
        self.outputs = tuple(infos)

    def _cur_dims(self, slot: _Slot) -> tuple[int, ...]:
        """An output's dims at the gear last set (acl.mdl.get_cur_output_dims)."""
        dims, ret = self._acl.mdl.get_cur_output_dims(self._desc, slot.index)
        check(f"acl.mdl.get_cur_output_dims({slot.index})", ret)
        return tuple(int(d) for d in dims.get("dims", [])[:dims.get("dimCount", 0)])

    def rename_outputs(self, names: list[str]) -> None:
        """Name the outputs by position (an OM whose output names cannot match the config's)."""
        for slot, name in zip(self._out_slots, names, strict=True):
            slot.info = TensorInfo(name, slot.info.data_type, slot.info.dims)
        self.outputs = tuple(s.info for s in self._out_slots)

    def _describe(self) -> None:
        """Inputs, outputs, sizes, dims and batch gears from the model description."""
        acl, desc = self._acl, self._desc
        gear_info, ret = acl.mdl.get_dynamic_batch(desc)
        check("acl.mdl.get_dynamic_batch", ret)
        self.gears: tuple[int, ...] = tuple(sorted(int(g) for g in gear_info.get("batch", [])[
            :gear_info.get("batchCount", 0)]))
        mbatch = -1
        if self.gears:
            mbatch, ret = acl.mdl.get_input_index_by_name(desc, DYNAMIC_BATCH_INPUT)
            check(f"acl.mdl.get_input_index_by_name({DYNAMIC_BATCH_INPUT})", ret)
        names = [acl.mdl.get_input_name_by_index(desc, i) for i in range(acl.mdl.get_num_inputs(desc))]
        if not self.gears and DYNAMIC_BATCH_INPUT in names:
            mbatch = names.index(DYNAMIC_BATCH_INPUT)
        self._mbatch_index = mbatch
        ins = [self._slot("input", i) for i in range(len(names))]
        self._in_slots = [s for i, s in enumerate(ins) if i != mbatch]
        self._mbatch_slots = [s for i, s in enumerate(ins) if i == mbatch]
        self._out_slots = [self._slot("output", i) for i in range(acl.mdl.get_num_outputs(desc))]
        # size 0: a -1 dim (gert ModelIoDesc::GetSize), on an input or on an output shaped by the data alone
        self.dynamic_shape = any(s.size == 0 for s in self._in_slots + self._out_slots)
        self.inputs = tuple(s.info for s in self._in_slots)
        self.outputs = tuple(s.info for s in self._out_slots)
        self.profiles: tuple[Profile, ...] = ()
        self._profile_kind = ""
        if mbatch >= 0 and not self.gears:
            self._profile_kind, self.profiles = self._read_profiles()
            self._mark_gear_axes()
        if mbatch >= 0 and not self.gears and not self.profiles:
            raise ExecutorError(f"{self.path}: the OM has {DYNAMIC_BATCH_INPUT} but neither batch, dimension "
                                "nor image-size gears this pyacl can read")
        self.max_batch: int | None = self.gears[-1] if self.gears else self._profile_max_batch()
        self.memory_bytes, self.memory_note = self._model_bytes()
        self.memory_bytes += sum(s.size for s in ins + self._out_slots)

    def _model_bytes(self) -> tuple[int, str]:
        """What the loaded model holds on the device, and a note when that is only an estimate: query_size's
        work + weight sizes, else what the load itself took of the device's free memory, else the file's
        size. A dynamic-shape OM's query answers work size 0 (its working memory is allocated at run time:
        hicann/ge model_manager.cc GetModelMemAndWeightSize), so its figure leaves that out, and says so."""
        work, weight, ret = self._acl.mdl.query_size(str(self.path))
        queried = int(work) + int(weight) if ret == 0 else None
        measured = self._load_bytes
        found = max(queried or 0, measured or 0) or self.path.stat().st_size
        if self.dynamic_shape:
            return found, ("an estimate: a dynamic-shape OM's working memory is allocated per execution and "
                           "not counted (query_size answers work size 0 for it)")
        if queried is None and measured is None:
            return found, "an estimate: the OM file's size (query_size failed, the load took no free memory)"
        return found, ""

    def _free(self) -> int | None:
        """Free bytes of the device's main memory (HBM, else DDR), None where AscendCL cannot say."""
        for attr in (ACL_HBM_MEM, ACL_DDR_MEM):
            free, total, ret = self._acl.rt.get_mem_info(attr)
            if ret == 0 and total > 0:
                return int(free)
        return None

    def _read_profiles(self) -> tuple[str, tuple[Profile, ...]]:
        """The OM's dimension gears (every input's shape concatenated, split by input) or image sizes."""
        mdl, desc = self._acl.mdl, self._desc
        model_dims = [s.info.dims for s in self._in_slots]
        count_fn = getattr(mdl, "get_input_dynamic_gear_count", None)
        count, ret = count_fn(desc, -1) if count_fn else (0, -1)
        if ret == 0 and count > 0:
            gears, ret = mdl.get_input_dynamic_dims(desc, -1, count)
            check("acl.mdl.get_input_dynamic_dims", ret)
            return "dims", tuple(self._split(tuple(int(d) for d in g["dims"][:g["dimCount"]]), model_dims)
                                 for g in gears)
        hw, ret = mdl.get_dynamic_hw(desc, -1) if hasattr(mdl, "get_dynamic_hw") else ({}, -1)
        if ret == 0 and hw.get("hwCount", 0) > 0:
            pairs = [tuple(int(v) for v in pair) for pair in hw["hw"][:hw["hwCount"]]]
            return "hw", tuple(Profile(pair, tuple(self._fill_hw(dims, pair) for dims in model_dims))
                               for pair in pairs)
        return "", ()

    def _mark_gear_axes(self) -> None:
        """-1 on every input axis a gear sets: the OM's own -1s, and any axis whose size the gears vary
        (whether the description reports such an axis as -1 or at its largest gear)."""
        for index, slot in enumerate(self._in_slots):
            dims = tuple(-1 if d == -1 or len({p.shapes[index][a] for p in self.profiles}) > 1 else d
                         for a, d in enumerate(slot.info.dims))
            slot.info = TensorInfo(slot.info.name, slot.info.data_type, dims)
        self.inputs = tuple(s.info for s in self._in_slots)

    @staticmethod
    def _split(values: tuple[int, ...], model_dims: list[tuple[int, ...]]) -> Profile:
        """A concatenated gear cut into each input's shape."""
        shapes, start = [], 0
        for dims in model_dims:
            shapes.append(values[start:start + len(dims)])
            start += len(dims)
        return Profile(values, tuple(shapes))

    @staticmethod
    def _fill_hw(dims: tuple[int, ...], pair: tuple[int, ...]) -> tuple[int, ...]:
        """An input's shape at an image size: its dynamic axes are H then W."""
        values = iter(pair * 2)
        return tuple(next(values) if d == -1 else d for d in dims)

    def _profile_max_batch(self) -> int | None:
        """With gears over the first input's first axis, the largest of them (the batch Triton may send)."""
        if not self.profiles or not self._in_slots or not self._in_slots[0].info.dims:
            return None
        return max(p.shapes[0][0] for p in self.profiles)

    def _slot(self, side: str, index: int) -> _Slot:
        """Describe one input/output and allocate its device buffer."""
        mdl = self._acl.mdl
        get_dims = mdl.get_input_dims if side == "input" else mdl.get_output_dims
        dims, ret = get_dims(self._desc, index)
        check(f"acl.mdl.get_{side}_dims({index})", ret)
        inp = side == "input"
        name = (mdl.get_input_name_by_index if inp else mdl.get_output_name_by_index)(self._desc, index)
        acl_type = (mdl.get_input_data_type if inp else mdl.get_output_data_type)(self._desc, index)
        if acl_type not in ACL_TYPES:
            raise ExecutorError(f"{self.path}: {side} {name} has ACL data type {acl_type}, not supported")
        size = (mdl.get_input_size_by_index if inp else mdl.get_output_size_by_index)(self._desc, index)
        shape = tuple(int(d) for d in dims.get("dims", [])[:dims.get("dimCount", 0)])
        data_type = ACL_TYPES[acl_type]
        info = TensorInfo(str(name) if inp else tensor_name(str(name)), data_type, shape)
        slot = _Slot(info, TRITON_TO_NUMPY[data_type], int(size), index)
        slot.device_ptr = self._malloc(slot.size) if slot.size else 0  # size 0: a dynamic shape, per request
        return slot

    def _malloc(self, size: int) -> int:
        """Device memory, freed at close."""
        ptr, ret = self._acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
        check(f"acl.rt.malloc({size})", ret)
        self._later(FREE, "acl.rt.free", lambda: self._acl.rt.free(ptr))
        return int(ptr)

    def _dataset(self, slots: list[_Slot], side: str) -> int:
        """A dataset wrapping the slots' device buffers, built once."""
        acl = self._acl
        dataset = acl.mdl.create_dataset()
        if not dataset:
            raise ExecutorError(f"acl.mdl.create_dataset ({side}) returned no dataset")
        self._later(DATASETS, "acl.mdl.destroy_dataset", lambda: acl.mdl.destroy_dataset(dataset))
        for slot in slots:
            buffer = acl.create_data_buffer(slot.device_ptr, slot.size)
            if not buffer:
                raise ExecutorError(f"acl.create_data_buffer ({side} {slot.info.name}) returned no buffer")
            self._later(BUFFERS, "acl.destroy_data_buffer", _bound(acl.destroy_data_buffer, buffer))
            _, ret = acl.mdl.add_dataset_buffer(dataset, buffer)
            check(f"acl.mdl.add_dataset_buffer ({side} {slot.info.name})", ret)
        return int(dataset)

    def run(self, feeds: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], RunStats]:
        """One synchronous execution: pad to a gear, copy in, execute, copy out, cut back."""
        if self._closed:
            raise ExecutorError(f"{self.path}: run after close")
        with self._lock:
            if self._closed:  # closed while this run waited for the lock
                raise ExecutorError(f"{self.path}: run after close")
            check("acl.rt.set_context", self._acl.rt.set_context(self._context))
            self._device_s = 0.0
            if self.dynamic_shape:
                outputs, h2d = self._run_dynamic_shape(feeds)
            elif self.profiles:
                outputs, h2d = self._run_profile(feeds)
            else:
                outputs, h2d = self._run_gear(feeds)
            device_s = self._device_s
        d2h = sum(int(a.nbytes) for a in outputs.values())
        return outputs, RunStats(h2d_bytes=h2d, d2h_bytes=d2h, device_seconds=device_s)

    def _execute(self, in_dataset: int, out_dataset: int) -> None:
        """acl.mdl.execute, checked, timed at its edges: pyACL holds the GIL for the whole call (mdl_wrap.cpp
        WrapAclMdlExecute), so no thread of this process can watch the device meanwhile; the device's busy
        time is what this measures."""
        started = time.perf_counter()
        ret = self._acl.mdl.execute(self._model_id, in_dataset, out_dataset)
        self._device_s += time.perf_counter() - started
        check("acl.mdl.execute", ret)

    def _run_gear(self, feeds: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], int]:
        """A static OM, or batch gears: the batch padded to the next gear and sliced back."""
        batch = int(next(iter(feeds.values())).shape[0]) if self.gears else 0
        gear = pick_gear(batch, self.gears) if self.gears else 0
        if self.gears:
            check(f"acl.mdl.set_dynamic_batch_size({gear})", self._acl.mdl.set_dynamic_batch_size(
                self._model_id, self._in_dataset, self._mbatch_index, gear))
        h2d = 0
        for slot in self._in_slots:
            array = feeds[slot.info.name]
            shape = (gear, *array.shape[1:]) if gear else tuple(array.shape)
            h2d += self._copy_in(slot.device_ptr, slot.size, slot.info.name, pad_to(array, shape, slot.dtype))
        self._execute(self._in_dataset, self._out_dataset)
        outputs = {}
        for slot in self._out_slots:
            array = self._copy_out(slot, self._cur_dims(slot) if gear else slot.info.dims)
            if gear and slot.batch_axis is not None and batch < array.shape[slot.batch_axis]:
                array = array.take(range(batch), axis=slot.batch_axis) if slot.batch_axis else array[:batch]
            outputs[slot.info.name] = array
        return outputs, h2d

    def _run_profile(self, feeds: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], int]:
        """Dimension or image-size gears: the smallest that holds the request, padded, cut back."""
        shapes = [tuple(int(d) for d in feeds[s.info.name].shape) for s in self._in_slots]
        profile = pick_profile(shapes, self.profiles, [s.info.dims for s in self._in_slots])
        self._set_profile(profile)
        h2d = sum(self._copy_in(slot.device_ptr, slot.size, slot.info.name,
                                pad_to(feeds[slot.info.name], gear, slot.dtype))
                  for slot, gear in zip(self._in_slots, profile.shapes, strict=True))
        self._execute(self._in_dataset, self._out_dataset)
        exact = list(profile.shapes) == shapes
        return {s.info.name: self._cut(s, self._copy_out(s, self._cur_dims(s)), shapes, exact)
                for s in self._out_slots}, h2d

    def _cut(self, slot: _Slot, array: np.ndarray, shapes: list[tuple[int, ...]], exact: bool) -> np.ndarray:
        """An output of a padded run cut back to the request's sizes on the axes that follow them."""
        index: list[slice] = []
        for axis, found in enumerate(slot.follows):
            if found is None and not exact:
                gears = [[list(s) for s in p.shapes] for p in self.profiles]
                raise ExecutorError(f"output {slot.info.name}: axis {axis} changes with the OM's gear but "
                                    "follows no input axis, so a padded run cannot be cut back: send shapes "
                                    f"that are one of its gears {gears}")
            sizes = {shapes[i][a] for i, a in found or ()}
            if len(sizes) > 1:
                raise ExecutorError(f"output {slot.info.name}: axis {axis} follows input axes whose request "
                                    f"sizes differ ({sorted(sizes)}): it cannot be cut back")
            index.append(slice(0, sizes.pop()) if sizes else slice(None))
        return array[tuple(index)]

    def _run_dynamic_shape(self, feeds: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], int]:
        """A dynamic-shape OM: per request, buffers at the real sizes, each input described; outputs
        allocated by AscendCL and read at the shape it describes."""
        acl = self._acl
        undo: list[Callable[[], Any]] = []
        try:
            in_dataset = self._request_dataset(undo)
            h2d = 0
            for slot in self._in_slots:
                array = np.ascontiguousarray(feeds[slot.info.name], dtype=slot.dtype)
                ptr, size = slot.device_ptr, slot.size
                if not size:
                    ptr, size = self._request_malloc(max(1, array.nbytes), undo), max(1, array.nbytes)
                self._add_buffer(in_dataset, ptr, size, undo)
                desc = acl.create_tensor_desc(ACL_TYPE_CODES[slot.info.data_type], list(array.shape),
                                              ACL_FORMAT_ND)
                undo.append(_bound(acl.destroy_tensor_desc, desc))
                _, ret = acl.mdl.set_dataset_tensor_desc(in_dataset, desc, slot.index)
                check(f"acl.mdl.set_dataset_tensor_desc({slot.info.name})", ret)
                h2d += self._copy_in(ptr, size, slot.info.name, array)
            out_dataset = self._request_dataset(undo)
            buffers = [self._add_buffer(out_dataset, s.device_ptr, s.size, undo) for s in self._out_slots]
            self._execute(in_dataset, out_dataset)
            for slot, buffer in zip(self._out_slots, buffers, strict=True):
                if not slot.size:
                    self._release_allocated(buffer, undo)
            outputs = {s.info.name: self._read_described(s, out_dataset, buffer, undo)
                       for s, buffer in zip(self._out_slots, buffers, strict=True)}
        finally:
            for action in reversed(undo):
                action()
        return outputs, h2d

    def _request_dataset(self, undo: list[Callable[[], Any]]) -> int:
        """A dataset for one request, destroyed after it."""
        dataset = self._acl.mdl.create_dataset()
        if not dataset:
            raise ExecutorError("acl.mdl.create_dataset returned no dataset")
        undo.append(_bound(self._acl.mdl.destroy_dataset, dataset))
        return int(dataset)

    def _request_malloc(self, size: int, undo: list[Callable[[], Any]]) -> int:
        """Device memory for one request."""
        ptr, ret = self._acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
        check(f"acl.rt.malloc({size})", ret)
        undo.append(_bound(self._acl.rt.free, ptr))
        return int(ptr)

    def _add_buffer(self, dataset: int, ptr: int, size: int, undo: list[Callable[[], Any]]) -> int:
        """A data buffer over ptr (0/0: AscendCL allocates the output) added to a request's dataset."""
        buffer = self._acl.create_data_buffer(ptr, size)
        if not buffer:
            raise ExecutorError(f"acl.create_data_buffer({size}) returned no buffer")
        undo.append(_bound(self._acl.destroy_data_buffer, buffer))
        _, ret = self._acl.mdl.add_dataset_buffer(dataset, buffer)
        check("acl.mdl.add_dataset_buffer", ret)
        return int(buffer)

    def _release_allocated(self, buffer: int, undo: list[Callable[[], Any]]) -> None:
        """Memory AscendCL allocated for an empty output buffer at execute: freed after the request (whatever
        reading the outputs meets) and the buffer emptied (aclUpdateDataBuffer), as its reference asks."""
        acl = self._acl
        undo.append(_bound(acl.rt.free, acl.get_data_buffer_addr(buffer)))
        undo.append(lambda: acl.update_data_buffer(buffer, 0, 0))

    def _read_described(self, slot: _Slot, dataset: int, buffer: int,
                        undo: list[Callable[[], Any]]) -> np.ndarray:
        """An output at the shape its tensor description gives (from the memory AscendCL allocated for an
        empty buffer)."""
        acl = self._acl
        desc = acl.mdl.get_dataset_tensor_desc(dataset, slot.index)
        if not desc:
            raise ExecutorError(f"output {slot.info.name}: AscendCL gave no tensor description")
        dims = []
        for axis in range(acl.get_tensor_desc_num_dims(desc)):
            dim, ret = acl.get_tensor_desc_dim_v2(desc, axis)
            check(f"acl.get_tensor_desc_dim_v2({slot.info.name}, {axis})", ret)
            dims.append(int(dim))
        shape = tuple(dims)
        ptr, size = slot.device_ptr, slot.size
        if not size:
            ptr, size = acl.get_data_buffer_addr(buffer), acl.get_data_buffer_size_v2(buffer)
        nbytes = int(np.prod(shape)) * slot.dtype.itemsize
        if nbytes > size:
            raise ExecutorError(f"output {slot.info.name}: its description says {nbytes} bytes, its buffer "
                                f"holds {size}")
        return self._read(ptr, nbytes, shape, slot)

    def _copy_in(self, device_ptr: int, size: int, name: str, array: np.ndarray) -> int:
        """Host→device for one input (contiguous, of its dtype); returns bytes copied."""
        if array.nbytes > size:
            raise ExecutorError(f"input {name}: {array.nbytes} bytes do not fit the OM's {size}")
        util = self._acl.util
        if hasattr(util, "bytes_to_ptr"):  # CANN >= 6.0.1
            keep: Any = array.tobytes()
            ptr = util.bytes_to_ptr(keep)
        else:  # older pyacl: the array's own memory (contiguous, alive until the copy returns)
            keep = array
            ptr = util.numpy_to_ptr(keep)
        check(f"acl.rt.memcpy(host→device, {name})", self._acl.rt.memcpy(
            device_ptr, size, ptr, array.nbytes, ACL_MEMCPY_HOST_TO_DEVICE))
        return int(array.nbytes)

    def _copy_out(self, slot: _Slot, shape: tuple[int, ...]) -> np.ndarray:
        """Device→host for one output at these dims (its whole buffer when a dim is unknown)."""
        known = all(d >= 0 for d in shape)
        nbytes = int(np.prod(shape)) * slot.dtype.itemsize if known else slot.size
        return self._read(slot.device_ptr, nbytes, shape, slot)

    def _read(self, device_ptr: int, nbytes: int, shape: tuple[int, ...], slot: _Slot) -> np.ndarray:
        """nbytes of an output copied once, from the device straight into the array the response is made
        of (a new one each time: it leaves with the response). aclrtMemcpy puts no condition on the host
        memory (CANN AscendCL reference; this glue's host→device copies already read a Python bytes buffer):
        no pinned staging buffer, no second copy out of it (ptr_to_bytes / ptr_to_numpy)."""
        known = all(d >= 0 for d in shape)
        array = np.empty(shape if known else (nbytes // slot.dtype.itemsize,), dtype=slot.dtype)
        if nbytes:
            check(f"acl.rt.memcpy(device→host, {slot.info.name})", self._acl.rt.memcpy(
                int(array.ctypes.data), nbytes, device_ptr, nbytes, ACL_MEMCPY_DEVICE_TO_HOST))
        return array

    def device_figures(self) -> DeviceFigures | None:
        """Memory and AICore utilization from AscendCL, without taking the execution lock.

        pyACL holds the GIL for a whole acl.mdl.execute (mdl_wrap.cpp WrapAclMdlExecute releases it
        nowhere), so on a real NPU this runs only between executions: its utilization reads the device
        while this process is not executing on it (telemetry takes busy time measured at execute's
        edges first). Contexts are per thread: the caller's thread makes ours current for itself; the
        lifecycle lock keeps close from destroying the context meanwhile.
        """
        acl = self._acl
        with self._life:
            if self._closed or acl.rt.set_context(self._context) != 0:
                return None
            used, total = self._memory()
            util_fn = getattr(acl.rt, "get_device_utilization_rate", None)  # absent from older pyacl
            info, util_ret = util_fn(self._user_id) if util_fn else ({}, -1)
        rates = [v for k, v in info.items() if k in ("cube_utilization", "vector_utilization") and v >= 0]
        return DeviceFigures(used_bytes=used, total_bytes=total,
                             utilization=max(rates) / 100.0 if util_ret == 0 and rates else None)

    def _memory(self) -> tuple[int | None, int | None]:
        """(used, total) of the device's main memory: HBM, or DDR where HBM answers 0/0 (Ascend 310)."""
        for attr in (ACL_HBM_MEM, ACL_DDR_MEM):
            free, total, ret = self._acl.rt.get_mem_info(attr)
            if ret == 0 and total > 0:  # a total of 0 is "no such memory", not a size
                return int(total - free), int(total)
        return None, None

    def close(self) -> None:
        """Tear down in order (unload, desc, buffers, datasets, free, context, device); safe twice."""
        with self._life:
            if self._closed:
                return
            self._closed = True
            self._teardown()

    def _teardown(self) -> None:
        """Undo everything in order, after any running execution."""
        failures = []
        with self._lock:
            if hasattr(self, "_context"):
                self._acl.rt.set_context(self._context)
            ordered = sorted(enumerate(self._undo), key=lambda item: (item[1][0], -item[0]))
            for _, (_, call, action) in ordered:
                ret = action()
                if ret != 0:
                    failures.append(f"{call} → {ret}")
            self._undo.clear()
        if failures:
            raise ExecutorError(f"{self.path}: teardown errors: {', '.join(failures)}")
