"""BF16 through the glue: numpy has no bfloat16, so the glue carries BF16 tensors as ml_dtypes.bfloat16 arrays
and crosses the two edges that refuse them by DLPack and by ONNX Runtime's typed OrtValues.

- Triton's Python backend (r24.10 src/pb_tensor.cc) hands a BF16 tensor out only by DLPack: `as_numpy()`
  raises "Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and from_dlpack()
  instead."; and `pb_utils.Tensor(name, array)` reads the numpy dtype (pb_stub_utils.cc
  numpy_to_triton_type), which knows no bfloat16. Its DLPack capsules carry kDLBfloat/16
  (pb_stub_utils.cc triton_to_dlpack_type, dlpack_to_triton_type).
- numpy's DLPack import and export know integers and floats but not kDLBfloat. The bits are the same as
  uint16's, so a capsule is relabelled in place (its DLManagedTensor's dtype, made fresh for each call:
  pb_tensor.cc PbTensor::ToDLPack, numpy's array.__dlpack__) between kDLUInt/16 and kDLBfloat/16, and each
  side reads the memory without a copy.
- ONNX Runtime's Python API refuses ml_dtypes arrays ("Numpy_type 256 can't be converted to MLDataType")
  and a BFLOAT16 OrtValue's .numpy() ("No corresponding Numpy type for Tensor Type. bfloat16"), but
  OrtValue.ortvalue_from_numpy_with_onnx_type takes a uint16 array as BFLOAT16 (element type 16).
"""

from __future__ import annotations

import ctypes
from typing import Any

import ml_dtypes
import numpy as np

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
ONNX_BFLOAT16 = 16  # onnx.TensorProto.BFLOAT16
_DL_UINT, _DL_BFLOAT = 1, 4  # dlpack.h DLDataTypeCode: kDLUInt, kDLBfloat
_DL_CPU = 1  # dlpack.h DLDeviceType kDLCPU


class _DLDataType(ctypes.Structure):
    _fields_ = (("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16))


class _DLTensorHead(ctypes.Structure):
    """The leading fields of dlpack.h's DLTensor (a DLManagedTensor starts with one), up to its dtype."""

    _fields_ = (("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("dtype", _DLDataType))


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = (ctypes.py_object, ctypes.c_char_p)
_capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
_capsule_set_name.restype = ctypes.c_int
_capsule_set_name.argtypes = (ctypes.py_object, ctypes.c_char_p)
_USED = ctypes.c_char_p(b"used_dltensor")  # a capsule keeps the pointer to its name: this one lives on


def _relabel(capsule: object, code_from: int, code_to: int) -> object:
    """The same capsule, its 16-bit dtype code changed (a capsule of another dtype is refused)."""
    head = _DLTensorHead.from_address(_capsule_pointer(capsule, b"dltensor"))
    dtype = head.dtype
    if (dtype.code, dtype.bits, dtype.lanes) != (code_from, 16, 1):
        raise ValueError(f"DLPack dtype code {dtype.code}, {dtype.bits} bits x{dtype.lanes}: expected "
                         f"code {code_from}, 16 bits x1")
    dtype.code = code_to
    return capsule


class _Exported:
    """A capsule numpy.from_dlpack can take (it asks the object, never a bare capsule)."""

    def __init__(self, capsule: object) -> None:
        self._capsule = capsule

    def __dlpack__(self, **_: object) -> object:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_DL_CPU, 0)


def from_triton(tensor: Any) -> np.ndarray:
    """A Triton BF16 tensor in CPU memory as a bfloat16 array over its memory (no copy)."""
    capsule = _relabel(tensor.to_dlpack(), _DL_BFLOAT, _DL_UINT)
    return np.from_dlpack(_Exported(capsule)).view(BFLOAT16)  # type: ignore[arg-type]


def to_triton(pb_utils: Any, name: str, array: np.ndarray) -> Any:
    """A Triton BF16 output tensor over a bfloat16 array's memory (no copy; numpy exports only writable,
    C-contiguous arrays by DLPack, so others are copied first)."""
    if not (array.flags.writeable and array.flags.c_contiguous):
        array = np.array(array, order="C")
    capsule = _relabel(array.view(np.uint16).__dlpack__(), _DL_UINT, _DL_BFLOAT)
    tensor = pb_utils.Tensor.from_dlpack(name, capsule)
    # The stub marks the capsule taken as "used_dlpack" (pb_tensor.cc FromDLPackCapsule), not DLPack's
    # "used_dltensor", which numpy's capsule destructor alone recognises as taken: renamed, it lets go
    # quietly (the tensor now owns the DLManagedTensor and calls its deleter). Left as it was, the stub
    # logged the destructor's error without end and Triton found it unhealthy (seen with Triton 2.51).
    _capsule_set_name(capsule, _USED)
    return tensor


def ort_value(ort: Any, array: np.ndarray) -> Any:
    """A bfloat16 array as an ONNX Runtime BFLOAT16 OrtValue over its memory."""
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.ascontiguousarray(array).view(np.uint16),
                                                           onnx_element_type=ONNX_BFLOAT16)


def from_ort(value: Any) -> np.ndarray:
    """An ONNX Runtime BFLOAT16 OrtValue's data copied into a bfloat16 array."""
    shape = tuple(value.shape())
    count = int(np.prod(shape, dtype=np.int64))
    if count == 0:
        return np.empty(shape, BFLOAT16)
    words = (ctypes.c_uint16 * count).from_address(value.data_ptr())
    return np.array(words, dtype=np.uint16).reshape(shape).view(BFLOAT16)
