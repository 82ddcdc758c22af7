"""The one small interface every executor (AscendCL, ONNX Runtime) offers the Triton model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from triton_ge_console.backend_glue.bfloat16 import BFLOAT16
from triton_ge_console.errors import GeConsoleError

# Triton data type names (without TYPE_) ↔ numpy dtypes, as the glue exchanges tensors.
TRITON_TO_NUMPY: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_), "UINT8": np.dtype(np.uint8), "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32), "UINT64": np.dtype(np.uint64), "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16), "INT32": np.dtype(np.int32), "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16), "FP32": np.dtype(np.float32), "FP64": np.dtype(np.float64),
    "STRING": np.dtype(np.object_),  # TYPE_STRING (BYTES): the Python backend hands object arrays of bytes
    "BF16": BFLOAT16,  # ml_dtypes' bfloat16: numpy has none (bfloat16.py carries it across Triton and ORT)
}


class ExecutorError(GeConsoleError, RuntimeError):
    """An executor failed to load or run; the message names the call and cause."""


@dataclass(frozen=True)
class TensorInfo:
    """One model input or output as the executor sees it (dims include the batch dim if any)."""

    name: str
    data_type: str  # Triton name: FP32, INT64, ...
    dims: tuple[int, ...]  # -1 for dynamic; () a scalar (when ranked)
    ranked: bool = True  # False: the model gives no shape (any rank)


@dataclass(frozen=True)
class RunStats:
    """Bytes moved by one execution (host→device, device→host; zero for CPU emulation), and the time the
    device itself ran (AscendCL's execute alone, measured at its edges; None where only the whole run is
    known)."""

    h2d_bytes: int = 0
    d2h_bytes: int = 0
    device_seconds: float | None = None


@dataclass(frozen=True)
class DeviceFigures:
    """What the device itself reports (AscendCL); None where it cannot say."""

    used_bytes: int | None = None
    total_bytes: int | None = None
    utilization: float | None = None  # 0..1


class Executor(Protocol):
    """Runs one loaded model: named numpy inputs in, named numpy outputs out."""

    kind: str  # "npu" | "cpu-emulated"
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    memory_bytes: int  # device memory this model holds (weights, workspace, I/O buffers)
    max_batch: int | None  # largest batch one execution takes (an OM's top gear), None: no limit

    def run(self, feeds: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], RunStats]:
        """Execute once synchronously on a whole batch."""
        ...

    def close(self) -> None:
        """Free everything the executor holds; safe to call twice."""
        ...

    def device_figures(self) -> DeviceFigures | None:
        """The device's own memory and utilization figures, None when emulated."""
        ...
