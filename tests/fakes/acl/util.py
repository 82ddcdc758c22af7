"""acl.util: host pointers for Python bytes, and bytes back from host memory."""

from __future__ import annotations

import ctypes

_KEEP: dict[int, bytes] = {}


def bytes_to_ptr(data: bytes) -> int:
    """The address of a bytes object's buffer (no copy; the caller keeps `data` alive)."""
    ptr = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0
    return int(ptr)


def ptr_to_bytes(ptr: int, size: int) -> bytes:
    """A copy of size bytes of host memory at ptr."""
    return ctypes.string_at(ptr, size)
