"""acl.util: host pointers for Python bytes or numpy arrays, and bytes or arrays back from host memory.

As hicann/runtime python/pyACL/util/ (bytes_convert.cpp, numpy_convert.cpp): `bytes_to_ptr(data)` is the
address of the bytes' buffer (no copy), `ptr_to_bytes(ptr, size)` a copy; `numpy_to_ptr(array)` is the
address of the array's data, `ptr_to_numpy(ptr, shape, npy_type)` an array *viewing* that memory (no copy;
npy_type is numpy's type number). CANN before 6.0.1 has only the numpy pair (`_versions`).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from . import _state

_NPY_TYPES = {np.dtype(t).num: np.dtype(t) for t in (
    np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
    np.float16, np.float32, np.float64)}


def bytes_to_ptr(data: bytes) -> int:
    """The address of a bytes object's buffer (no copy; the caller keeps `data` alive)."""
    ptr = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0
    return int(ptr)


def ptr_to_bytes(ptr: int, size: int) -> bytes:
    """A copy of size bytes of host memory at ptr."""
    _state.STATE.calls["util.ptr_to_bytes"] += 1
    return ctypes.string_at(ptr, size)


def numpy_to_ptr(array: Any) -> int:
    """The address of an ndarray's data (PyArray_BYTES): a non-contiguous array's base, not a copy."""
    if not isinstance(array, np.ndarray):
        raise ValueError("needs an ndarray as argument")
    return int(array.ctypes.data)


def ptr_to_numpy(ptr: int, shape: tuple[int, ...], npy_type: int) -> np.ndarray:
    """An ndarray over the memory at ptr (PyArray_NewFromDescr on ptr): it changes when that memory does."""
    _state.STATE.calls["util.ptr_to_numpy"] += 1
    dtype = _NPY_TYPES[npy_type]
    count = int(np.prod(shape)) if shape else 1
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(ptr)
    return np.frombuffer(raw, dtype=dtype).reshape(shape)
