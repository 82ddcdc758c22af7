"""CPU emulation: run the model's ONNX through ONNX Runtime behind the executor interface."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from triton_ge_console.backend_glue.executor import DeviceFigures, ExecutorError, RunStats, TensorInfo
from triton_ge_console.repository.external_data import external_bytes

# ONNX Runtime's type strings → Triton data type names.
_ORT_TO_TRITON = {
    "tensor(bool)": "BOOL", "tensor(uint8)": "UINT8", "tensor(uint16)": "UINT16", "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64", "tensor(int8)": "INT8", "tensor(int16)": "INT16", "tensor(int32)": "INT32",
    "tensor(int64)": "INT64", "tensor(float16)": "FP16", "tensor(float)": "FP32", "tensor(double)": "FP64",
}
_EMPTY_STATS = RunStats()


def _dims(shape: list[object]) -> tuple[int, ...]:
    """ORT shapes hold ints, symbolic names or None; anything not an int is dynamic (-1)."""
    return tuple(d if isinstance(d, int) and d >= 0 else -1 for d in shape)


def _info(node: object, path: Path) -> TensorInfo:
    """TensorInfo from an ORT NodeArg, refusing types Triton cannot carry here."""
    name, type_text, shape = node.name, node.type, node.shape  # type: ignore[attr-defined]
    if type_text not in _ORT_TO_TRITON:
        raise ExecutorError(f"{path}: tensor {name} has type {type_text}, which the ge glue does not support")
    return TensorInfo(name, _ORT_TO_TRITON[type_text], _dims(list(shape)))


class OnnxRuntimeExecutor:
    """The CPU stand-in for an NPU: same interface, labelled cpu-emulated."""

    kind = "cpu-emulated"
    max_batch: int | None = None

    def __init__(self, onnx_path: Path, intra_op_threads: int = 0, inter_op_threads: int = 0,
                 io_bytes: int = 0) -> None:
        import onnxruntime as ort

        if not onnx_path.is_file():
            raise ExecutorError(f"ONNX model {onnx_path}: no such file")
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(0, intra_op_threads)
        options.inter_op_num_threads = max(0, inter_op_threads)
        try:
            self._session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # ORT raises its own exception types for bad graphs
            raise ExecutorError(f"ONNX Runtime could not load {onnx_path}: {exc}") from exc
        self.path = onnx_path
        self.inputs = tuple(_info(n, onnx_path) for n in self._session.get_inputs())
        self.outputs = tuple(_info(n, onnx_path) for n in self._session.get_outputs())
        self._output_names = [o.name for o in self.outputs]
        self.memory_bytes = onnx_path.stat().st_size + external_bytes(onnx_path) + io_bytes

    def run(self, feeds: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], RunStats]:
        """One synchronous ONNX Runtime run."""
        if self._session is None:
            raise ExecutorError(f"{self.path}: run after close")
        results = self._session.run(self._output_names, feeds)
        return dict(zip(self._output_names, results, strict=True)), _EMPTY_STATS

    def close(self) -> None:
        """Drop the session (ORT frees it)."""
        self._session = None

    def device_figures(self) -> DeviceFigures | None:
        """An emulated device reports nothing itself: the ledger's figures apply."""
        return None
