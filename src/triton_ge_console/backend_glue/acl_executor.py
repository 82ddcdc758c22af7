"""Run an Ascend offline model (.om) through AscendCL's Python API (`acl`, from CANN, imported lazily).

Per instance: set_device, create_context, load_from_file, a model description, and device buffers plus
datasets allocated once and reused. Per execution, under a lock: memcpy host→device, execute (sync),
memcpy device→host. OMs built with batch gears get the `ascend_mbatch_shape_data` input and
`set_dynamic_batch_size`: a batch is padded to the next gear, each output read at the dims
`get_cur_output_dims` gives for that gear, and what the gear padded sliced off.

Supported: CANN 5.x to 8.x pyacl. Before CANN 6.0.1 pyacl has no `acl.util.bytes_to_ptr`/`ptr_to_bytes`
and the numpy pair is used (as Huawei's samples do); without `get_device_utilization_rate` utilization
comes from the glue's own busy time; on Ascend 310 cards (no HBM) memory is read as DDR.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
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
DYNAMIC_BATCH_INPUT = "ascend_mbatch_shape_data"
ACL_TYPES = {0: "FP32", 1: "FP16", 2: "INT8", 3: "INT32", 4: "UINT8", 6: "INT16", 7: "UINT16",
             8: "UINT32", 9: "INT64", 10: "UINT64", 11: "FP64", 12: "BOOL"}
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
    host_ptr: int = 0
    batch_axis: int | None = None  # outputs with gears: the axis a gear pads


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
        acl, dev = self._acl, self.device_id
        acl_init(acl)
        check("acl.rt.set_device", acl.rt.set_device(dev))
        self._later(DEVICE, "acl.rt.reset_device", lambda: acl.rt.reset_device(dev))
        self._context, ret = acl.rt.create_context(dev)
        check("acl.rt.create_context", ret)
        self._later(CONTEXT, "acl.rt.destroy_context", lambda: acl.rt.destroy_context(self._context))
        self._model_id, ret = acl.mdl.load_from_file(str(self.path))
        check(f"acl.mdl.load_from_file({self.path})", ret)
        self._later(UNLOAD, "acl.mdl.unload", lambda: acl.mdl.unload(self._model_id))
        self._desc = acl.mdl.create_desc()
        if not self._desc:
            raise ExecutorError("acl.mdl.create_desc returned no description")
        self._later(DESC, "acl.mdl.destroy_desc", lambda: acl.mdl.destroy_desc(self._desc))
        check("acl.mdl.get_desc", acl.mdl.get_desc(self._desc, self._model_id))
        self._describe()
        self._in_dataset = self._dataset(self._in_slots + self._mbatch_slots, "input")
        self._out_dataset = self._dataset(self._out_slots, "output")
        self._find_batch_axes()

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
        self._mbatch_index = mbatch
        ins = [self._slot("input", i) for i in range(acl.mdl.get_num_inputs(desc))]
        self._in_slots = [s for i, s in enumerate(ins) if i != mbatch]
        self._mbatch_slots = [s for i, s in enumerate(ins) if i == mbatch]
        self._out_slots = [self._slot("output", i) for i in range(acl.mdl.get_num_outputs(desc))]
        for slot in self._out_slots:
            slot.host_ptr = self._malloc_host(slot.size)
        self.inputs = tuple(s.info for s in self._in_slots)
        self.outputs = tuple(s.info for s in self._out_slots)
        self.max_batch: int | None = self.gears[-1] if self.gears else None
        # query_size refuses OMs with fully dynamic shapes: the OM file's size stands in for its weights then
        work, weight, ret = acl.mdl.query_size(str(self.path))
        model_bytes = int(work) + int(weight) if ret == 0 else self.path.stat().st_size
        self.memory_bytes = model_bytes + sum(s.size for s in ins + self._out_slots)

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
        slot.device_ptr = self._malloc(slot.size)
        return slot

    def _malloc(self, size: int) -> int:
        """Device memory, freed at close."""
        ptr, ret = self._acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
        check(f"acl.rt.malloc({size})", ret)
        self._later(FREE, "acl.rt.free", lambda: self._acl.rt.free(ptr))
        return int(ptr)

    def _malloc_host(self, size: int) -> int:
        """Host staging memory for device→host copies, freed at close."""
        ptr, ret = self._acl.rt.malloc_host(size)
        check(f"acl.rt.malloc_host({size})", ret)
        self._later(FREE, "acl.rt.free_host", lambda: self._acl.rt.free_host(ptr))
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
        """One synchronous execution: pad to a gear, copy in, execute, copy out, slice."""
        if self._closed:
            raise ExecutorError(f"{self.path}: run after close")
        batch = int(next(iter(feeds.values())).shape[0]) if self.gears else 0
        gear = pick_gear(batch, self.gears) if self.gears else 0
        acl = self._acl
        with self._lock:
            if self._closed:  # closed while this run waited for the lock
                raise ExecutorError(f"{self.path}: run after close")
            check("acl.rt.set_context", acl.rt.set_context(self._context))
            if self.gears:
                check(f"acl.mdl.set_dynamic_batch_size({gear})", acl.mdl.set_dynamic_batch_size(
                    self._model_id, self._in_dataset, self._mbatch_index, gear))
            h2d = sum(self._copy_in(slot, feeds[slot.info.name], gear) for slot in self._in_slots)
            check("acl.mdl.execute", acl.mdl.execute(self._model_id, self._in_dataset, self._out_dataset))
            outputs = {s.info.name: self._copy_out(s, gear, batch) for s in self._out_slots}
        d2h = sum(int(a.nbytes) for a in outputs.values())
        return outputs, RunStats(h2d_bytes=h2d, d2h_bytes=d2h)

    def _copy_in(self, slot: _Slot, array: np.ndarray, gear: int) -> int:
        """Host→device for one input, padded with zeros up to the gear; returns bytes copied."""
        if gear and array.shape[0] < gear:
            padded = np.zeros((gear, *array.shape[1:]), dtype=slot.dtype)
            padded[:array.shape[0]] = array
            array = padded
        array = np.ascontiguousarray(array, dtype=slot.dtype)
        if array.nbytes > slot.size:
            raise ExecutorError(f"input {slot.info.name}: {array.nbytes} bytes do not fit the OM's "
                                f"{slot.size}")
        util = self._acl.util
        if hasattr(util, "bytes_to_ptr"):  # CANN >= 6.0.1
            keep: Any = array.tobytes()
            ptr = util.bytes_to_ptr(keep)
        else:  # older pyacl: the array's own memory (contiguous, alive until the copy returns)
            keep = array
            ptr = util.numpy_to_ptr(keep)
        check(f"acl.rt.memcpy(host→device, {slot.info.name})", self._acl.rt.memcpy(
            slot.device_ptr, slot.size, ptr, array.nbytes, ACL_MEMCPY_HOST_TO_DEVICE))
        return int(array.nbytes)

    def _copy_out(self, slot: _Slot, gear: int, batch: int) -> np.ndarray:
        """Device→host for one output at its dims for this gear; the gear's padding sliced off."""
        shape = self._cur_dims(slot) if gear else slot.info.dims
        known = all(d >= 0 for d in shape)
        nbytes = int(np.prod(shape)) * slot.dtype.itemsize if known else slot.size
        check(f"acl.rt.memcpy(device→host, {slot.info.name})", self._acl.rt.memcpy(
            slot.host_ptr, slot.size, slot.device_ptr, nbytes, ACL_MEMCPY_DEVICE_TO_HOST))
        util = self._acl.util
        if hasattr(util, "ptr_to_bytes"):  # CANN >= 6.0.1
            array = np.frombuffer(util.ptr_to_bytes(slot.host_ptr, nbytes), dtype=slot.dtype)
        else:  # older pyacl: a view of the staging buffer, reused by the next run: copy it
            count = nbytes // slot.dtype.itemsize
            array = util.ptr_to_numpy(slot.host_ptr, (count,), slot.dtype.num).copy()
        array = array.reshape(shape) if known else array
        if gear and slot.batch_axis is not None and batch < array.shape[slot.batch_axis]:
            array = array.take(range(batch), axis=slot.batch_axis) if slot.batch_axis else array[:batch]
        return array

    def device_figures(self) -> DeviceFigures | None:
        """Memory and AICore utilization from AscendCL, without waiting for (or holding up) an execution.

        Contexts are per thread: the caller's thread makes ours current for itself, so the execution
        lock is not needed; the lifecycle lock keeps close from destroying the context meanwhile.
        """
        acl = self._acl
        with self._life:
            if self._closed or acl.rt.set_context(self._context) != 0:
                return None
            used, total = self._memory()
            util_fn = getattr(acl.rt, "get_device_utilization_rate", None)  # absent from older pyacl
            info, util_ret = util_fn(self.device_id) if util_fn else ({}, -1)
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
