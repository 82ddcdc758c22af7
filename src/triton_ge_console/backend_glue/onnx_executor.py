"""CPU emulation: run the model's ONNX through ONNX Runtime behind the executor interface."""

from __future__ import annotations

import ctypes
import functools
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from triton_ge_console.backend_glue import bfloat16
from triton_ge_console.backend_glue.executor import DeviceFigures, ExecutorError, RunStats, TensorInfo
from triton_ge_console.model_files.external_data import external_bytes
from triton_ge_console.model_files.onnx_io import strings_beside_bf16

# ONNX Runtime's type strings → Triton data type names.
_ORT_TO_TRITON = {
    "tensor(bool)": "BOOL", "tensor(uint8)": "UINT8", "tensor(uint16)": "UINT16", "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64", "tensor(int8)": "INT8", "tensor(int16)": "INT16", "tensor(int32)": "INT32",
    "tensor(int64)": "INT64", "tensor(float16)": "FP16", "tensor(float)": "FP32", "tensor(double)": "FP64",
    "tensor(string)": "STRING", "tensor(bfloat16)": "BF16",
}
_EMPTY_STATS = RunStats()
# Output buffers kept per input-shape signature (an instance sees few: its batch sizes x sequence lengths),
# the least recently used dropped beyond this many.
_BUFFER_SHAPES = 16
Signature = tuple[tuple[int, ...], ...]


def _dims(shape: list[object]) -> tuple[int, ...]:
    """ORT shapes hold ints, symbolic names or None; anything not an int is dynamic (-1)."""
    return tuple(d if isinstance(d, int) and d >= 0 else -1 for d in shape)


def _info(node: object, path: Path, unranked: set[str]) -> TensorInfo:
    """TensorInfo from an ORT NodeArg, refusing types Triton cannot carry here (ORT shows a tensor of
    unknown rank as [], like a scalar: `unranked` names those, read from the graph itself)."""
    name, type_text, shape = node.name, node.type, node.shape  # type: ignore[attr-defined]
    if type_text not in _ORT_TO_TRITON:
        raise ExecutorError(f"{path}: tensor {name} has type {type_text}, which the ge glue does not support")
    return TensorInfo(name, _ORT_TO_TRITON[type_text], _dims(list(shape)), ranked=name not in unranked)


def _unranked(onnx_path: Path) -> set[str]:
    """Graph inputs and outputs that carry no shape at all (read without the weights)."""
    import onnx

    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    return {v.name for v in (*graph.input, *graph.output)
            if v.type.WhichOneof("value") == "tensor_type" and not v.type.tensor_type.HasField("shape")}


def _as_text(array: np.ndarray) -> np.ndarray:
    """A STRING tensor as ONNX Runtime wants it (str objects; Triton hands bytes), refusing what is not
    UTF-8: ONNX strings are text."""
    try:
        return np.array([v.decode("utf-8") if isinstance(v, bytes) else v for v in array.flat],
                        dtype=np.object_).reshape(array.shape)
    except UnicodeDecodeError as exc:
        raise ValueError(f"a STRING element is not UTF-8 ({exc.reason}); ONNX strings are text") from None


class OnnxRuntimeExecutor:
    """The CPU stand-in for an NPU: same interface, labelled cpu-emulated.

    Outputs are written into buffers the executor owns (ONNX Runtime's IOBinding), one set per input-shape
    signature, reused from one run to the next: a run's outputs are valid until the next run. The Triton
    model hands them to the Python backend, which copies them into shared memory when the responses are
    sent, before it calls execute again (a stub runs one execute at a time), so the reuse is safe there.
    A signature whose output shapes change from run to run (data-dependent) falls back to plain runs.
    """

    kind = "cpu-emulated"
    max_batch: int | None = None

    def __init__(self, onnx_path: Path, intra_op_threads: int = 0, inter_op_threads: int = 0,
                 io_bytes: int = 0, spinning: bool = False) -> None:
        import onnxruntime as ort

        self._ort = ort
        if not onnx_path.is_file():
            raise ExecutorError(f"ONNX model {onnx_path}: no such file")
        try:
            self._session = ort.InferenceSession(str(onnx_path), _options(ort, intra_op_threads,
                                                                          inter_op_threads, spinning),
                                                 providers=["CPUExecutionProvider"])
        except Exception as exc:  # ORT raises its own exception types for bad graphs
            raise ExecutorError(f"ONNX Runtime could not load {onnx_path}: {exc}") from exc
        self.path = onnx_path
        self.metadata: dict[str, str] = dict(self._session.get_modelmeta().custom_metadata_map)
        self._releasing = ort.RunOptions()  # a run after which the CPU arena shrinks to what is in use
        self._releasing.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        unranked = _unranked(onnx_path)
        self.inputs = tuple(_info(n, onnx_path, unranked) for n in self._session.get_inputs())
        self.outputs = tuple(_info(n, onnx_path, unranked) for n in self._session.get_outputs())
        problem = strings_beside_bf16(self.inputs, self.outputs)
        if problem:
            raise ExecutorError(f"{onnx_path}: {problem}")
        # inputs with initializers (defaults): fed only when a config declares them and a request sends them
        overridable = self._session.get_overridable_initializers()
        self.defaults = tuple(_info(n, onnx_path, unranked) for n in overridable if n.type in _ORT_TO_TRITON)
        self._texts = [i.name for i in self.inputs if i.data_type == "STRING"]
        # BF16 crosses into ORT as typed OrtValues (its numpy bridge has no bfloat16; bfloat16.py)
        self._halves = {i.name for i in (*self.inputs, *self.defaults) if i.data_type == "BF16"}
        self._half_out = any(o.data_type == "BF16" for o in self.outputs)
        # strings are Python objects: never bound to buffers, ORT allocates them on each run
        self._bindable = not any(t.data_type == "STRING" for t in (*self.inputs, *self.outputs))
        self._input_names = [i.name for i in self.inputs]
        self._output_names = [o.name for o in self.outputs]
        self._binding = self._session.io_binding()
        self._buffers: OrderedDict[Signature, list[np.ndarray]] = OrderedDict()
        self._unbound: set[Signature] = set()  # signatures whose output shapes are not fixed
        self._bound: Signature | None = None  # whose buffers the binding's outputs point at
        self.memory_bytes = onnx_path.stat().st_size + external_bytes(onnx_path) + io_bytes

    def run(self, feeds: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], RunStats]:
        """One synchronous ONNX Runtime run, into this signature's buffers once its shapes are known."""
        if self._session is None:
            raise ExecutorError(f"{self.path}: run after close")
        if self._texts:
            feeds = {**feeds, **{name: _as_text(feeds[name]) for name in self._texts if name in feeds}}
        signature = _signature(feeds, self._input_names) if self._bindable else None
        buffers = None if signature is None else self._buffers.get(signature)
        if buffers is not None and self._run_bound(signature, feeds, buffers):  # type: ignore[arg-type]
            self._buffers.move_to_end(signature)  # type: ignore[arg-type]
            return dict(zip(self._output_names, buffers, strict=True)), _EMPTY_STATS
        results = self._plain_run(feeds)
        if signature is not None and signature not in self._unbound:
            self._remember(signature, results, refused=buffers is not None)
        return dict(zip(self._output_names, results, strict=True)), _EMPTY_STATS

    def run_fresh(self, feeds: dict[str, np.ndarray], release: bool = False) -> dict[str, np.ndarray]:
        """One plain run, outputs allocated for the caller to keep: for input shapes that rarely repeat
        (a decode step's past grows every step), where keeping buffers per shape only costs (0.26 ms a
        step over a plain run for the demo llama, measured). release: the arena gives back what the run
        used beyond what it still holds (a prefill chunk's attention: ORT's arena otherwise keeps its
        high-water mark for good, 143 MiB after one 6,000-token prompt)."""
        if self._session is None:
            raise ExecutorError(f"{self.path}: run after close")
        outputs = dict(zip(self._output_names, self._plain_run(feeds, release), strict=True))
        if release:
            trim_heap()
        return outputs

    def _plain_run(self, feeds: dict[str, np.ndarray], release: bool = False) -> list[Any]:
        """ORT allocates the outputs; BF16 ones come back as OrtValues, copied into bfloat16 arrays (that
        run takes only OrtValues: every input goes as one then, as a decoder's INT64 ids beside its BF16
        cache)."""
        if not self._half_out:
            if self._halves:
                feeds = {name: bfloat16.ort_value(self._ort, array) if name in self._halves else array
                         for name, array in feeds.items()}
            return self._session.run(self._output_names, feeds,  # type: ignore[union-attr]
                                     self._releasing if release else None)
        values = self._session.run_with_ort_values(  # type: ignore[union-attr]
            self._output_names, {name: self._ort_value(name, array) for name, array in feeds.items()},
            self._releasing if release else None)
        return [bfloat16.from_ort(v) if v.data_type() == "tensor(bfloat16)" else v.numpy() for v in values]

    def _ort_value(self, name: str, array: np.ndarray) -> Any:
        """One input as an OrtValue over its memory (ORT refuses STRING ones: "only supported from
        non-string numpy arrays")."""
        if name in self._halves:
            return bfloat16.ort_value(self._ort, array)
        return self._ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array))

    def _run_bound(self, signature: Signature, feeds: dict[str, np.ndarray],
                   buffers: list[np.ndarray]) -> bool:
        """Run with inputs and outputs bound to arrays (no output allocation); False where ORT refuses
        (then the caller runs unbound: a bad input fails there, a data-dependent shape is learnt)."""
        binding = self._binding
        if self._bound != signature:
            binding.clear_binding_outputs()
            for name, array in zip(self._output_names, buffers, strict=True):
                if array.dtype == bfloat16.BFLOAT16:
                    binding.bind_ortvalue_output(name, bfloat16.ort_value(self._ort, array))
                else:
                    binding.bind_output(name, "cpu", 0, array.dtype, list(array.shape), array.ctypes.data)
            self._bound = signature
        for name in self._input_names:
            if name in self._halves:
                binding.bind_ortvalue_input(name, bfloat16.ort_value(self._ort, feeds[name]))
            else:
                binding.bind_cpu_input(name, feeds[name])
        try:
            self._session.run_with_iobinding(binding)  # type: ignore[union-attr]
        except Exception:  # ORT's own types; the unbound run then says what is wrong
            return False
        return True

    def _remember(self, signature: Signature, results: list[object], refused: bool) -> None:
        """Give this signature buffers shaped like the run's outputs, or none when its bound run was
        refused yet the plain run worked (output shapes that depend on the data) or ORT answered with
        something other than tensors (sequences, maps)."""
        if refused or not all(isinstance(r, np.ndarray) for r in results):
            self._buffers.pop(signature, None)
            self._unbound.add(signature)
            self._bound = None
            return
        self._buffers[signature] = [np.empty(r.shape, r.dtype) for r in results]  # type: ignore[attr-defined]
        while len(self._buffers) > _BUFFER_SHAPES:
            dropped, _ = self._buffers.popitem(last=False)
            if dropped == self._bound:
                self._bound = None

    def close(self) -> None:
        """Drop the session and the buffers (ORT frees the session)."""
        self._session = None
        self._buffers.clear()

    def device_figures(self) -> DeviceFigures | None:
        """An emulated device reports nothing itself: the ledger's figures apply."""
        return None


def _signature(feeds: dict[str, np.ndarray], names: list[str]) -> Signature | None:
    """The input shapes that fix the output buffers, None when feeds are not exactly the model's
    inputs as C-contiguous arrays (then ORT's plain run handles, or refuses, them)."""
    if len(feeds) != len(names):
        return None
    arrays = [feeds.get(n) for n in names]
    if not all(isinstance(a, np.ndarray) and a.flags.c_contiguous for a in arrays):
        return None
    return tuple(a.shape for a in arrays)  # type: ignore[union-attr]


def trim_heap() -> None:
    """Hand the C heap's free pages back to the system (glibc's malloc_trim, every thread's arena): what
    the arena frees otherwise stays with the process (the stub kept 129 MiB of a 6,000-token prompt's
    prefill, its chunks run on two threads; MALLOC_TRIM_THRESHOLD_ keeps up to 64 MiB per arena)."""
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)


@functools.cache
def _libc() -> object:
    """The process's C library (its symbols: None where ctypes cannot open it)."""
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def _options(ort: object, intra_op_threads: int, inter_op_threads: int, spinning: bool) -> object:
    """Session options that leave the CPU to Triton between runs: ORT's pool threads spin-wait for work
    by default, which on a CPU shared with the server, the stub and other instances takes the cores
    the server needs to answer (off unless the config's `ort_spinning` asks for it)."""
    options = ort.SessionOptions()  # type: ignore[attr-defined]
    options.intra_op_num_threads = max(0, intra_op_threads)
    options.inter_op_num_threads = max(0, inter_op_threads)
    spin = "1" if spinning else "0"
    options.add_session_config_entry("session.intra_op.allow_spinning", spin)
    options.add_session_config_entry("session.inter_op.allow_spinning", spin)
    return options
