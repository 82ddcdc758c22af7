"""The one TritonPythonModel serving `backend: "ge"` and `backend: "npu_ge"` (AscendCL or CPU emulation)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any

import numpy as np

from triton_ge_console.backend_glue import autocomplete, batching, bfloat16
from triton_ge_console.backend_glue.executor import Executor, ExecutorError, RunStats, TensorInfo
from triton_ge_console.backend_glue.generate_protocol import is_generate
from triton_ge_console.backend_glue.ledger import DeviceLedger
from triton_ge_console.backend_glue.loading import (
    check_config_against_model,
    declared_defaults,
    glue_flattened,
    open_executor,
    squeezed,
)
from triton_ge_console.backend_glue.settings import GlueSettings, honour_pythonpath, load_settings
from triton_ge_console.backend_glue.telemetry import Telemetry

honour_pythonpath()


def _pb_utils() -> Any:
    """Triton's Python backend utilities (only importable inside the stub)."""
    import triton_python_backend_utils as pb_utils

    return pb_utils


class TritonPythonModel:
    """One model instance: an executor on one (real or emulated) device, with batching and telemetry."""

    settings: GlueSettings
    executor: Executor

    @staticmethod
    def auto_complete_config(auto_complete_model_config: Any) -> Any:
        """Add inputs/outputs read from the ONNX when the config leaves them out (npu_ge style)."""
        return autocomplete.auto_complete(auto_complete_model_config)

    def initialize(self, args: dict[str, str]) -> None:
        """Resolve settings, open the executor, reserve device memory, start telemetry."""
        pb_utils = _pb_utils()
        config = json.loads(args["model_config"])
        if is_generate(config):  # a decoupled model generates tokens: its own class serves it
            from triton_ge_console.backend_glue.generate_model import GenerateModel

            self.__class__ = GenerateModel  # type: ignore[assignment]
            return self.initialize(args)
        self.settings = load_settings(args, config)
        self.executor = open_executor(self.settings, config)
        self.owner = f"{os.getpid()}:{self.settings.model_name}:{self.settings.instance_name}"
        try:
            self.ledgers = tuple(DeviceLedger(d) for d in self.settings.devices or (self.settings.device_id,))
            check_config_against_model(self.settings, config, self.executor)
            self._reserve_memory()
            self.telemetry = self._telemetry(pb_utils)
        except BaseException:
            with contextlib.suppress(Exception):  # the load failure is the error worth reporting
                self.finalize()
            raise
        self.inputs: tuple[TensorInfo, ...] = self.executor.inputs
        self.input_names = [i.name for i in self.inputs]
        self.batched = self.settings.max_batch_size > 0
        # inputs with defaults the config declares: passed on when a request sends them
        defaults = declared_defaults(config, self.executor)
        self.defaults = [d.name for d in defaults]
        # model scalars, served as dims [1]: squeezed for the model, expanded for Triton
        self.scalar_inputs = [i.name for i in (*self.inputs, *defaults) if squeezed(i, self.batched)]
        self.scalar_outputs = [o.name for o in self.executor.outputs if squeezed(o, self.batched)]
        # batch-only tensors declared dims [1] without reshape: [N, 1] for Triton, [N] for the model
        self.flat_inputs = glue_flattened(config.get("input", []), (*self.inputs, *defaults), self.batched)
        self.flat_outputs = glue_flattened(config.get("output", []), self.executor.outputs, self.batched)
        # BF16 crosses the Python backend by DLPack only (bfloat16.py)
        self.bf16_inputs = {i.name for i in (*self.inputs, *defaults) if i.data_type == "BF16"}
        self.bf16_outputs = {o.name for o in self.executor.outputs if o.data_type == "BF16"}
        # hoisted out of the per-request path: the utilities module, and whether responses need
        # filtering by requested outputs at all (Triton refuses unknown names, so one output never does)
        self.pb_utils = pb_utils
        self.filter_outputs = len(self.executor.outputs) > 1
        pb_utils.Logger.log_info(self._load_message())

    def _reserve_memory(self) -> None:
        """Claim the model's memory in each of its NPUs' shared pools (a real NPU's own capacity, else
        emulated), as much on each as GlueSettings.memory_per_device says."""
        figures = self.executor.device_figures()
        capacity = self.settings.device_memory_bytes
        if figures is not None and figures.total_bytes:
            capacity = figures.total_bytes
        share = self.memory_share()
        for ledger in self.ledgers:
            ledger.reserve(self.owner, self.settings.model_name, share, capacity, self.settings.instance_name)

    def memory_share(self) -> int:
        """What the instance is charged on each of its NPUs (npu_ge: its part of a full copy per NPU)."""
        return self.settings.memory_per_device(self.executor.memory_bytes)

    def _telemetry(self, pb_utils: Any) -> Telemetry | None:
        """Custom metrics, or None (logged) where this Triton's Python backend cannot offer them."""
        try:
            return Telemetry(pb_utils, self.settings, self.ledgers, self.executor.device_figures,
                             self.memory_share())
        except Exception as exc:  # metrics must never keep a model from serving (older Python backends)
            pb_utils.Logger.log_warn(f"ge glue: model {self.settings.model_name}: custom metrics off: {exc}")
            return None

    def _load_message(self) -> str:
        """The line logged at load: which mode, device and file this instance runs."""
        s = self.settings
        source = s.om_path if s.mode == "npu" else s.onnx_path
        devices = ",".join(str(d) for d in s.devices or (s.device_id,))
        said = getattr(self.executor, "memory_note", "")  # the AscendCL executor's, when only an estimate
        if s.npus_unknown:
            devices += (" (npu_ge names no device_ids: it runs on every NPU the process sees, how many is "
                        "unknown here, so only this one is charged and its utilization reads unknown)")
        note = f" ({said})" if said else ""
        return (f"ge glue: model {s.model_name} instance {s.instance_name} execution_mode={s.kind} "
                f"(requested {s.requested_mode}) device={devices} "
                f"memory={self.executor.memory_bytes} bytes{note} source={source}")

    def execute(self, requests: list[Any]) -> list[Any]:
        """Run every runnable request, grouped into as few executions as their shapes allow."""
        pb_utils = self.pb_utils
        if len(requests) == 1:  # the common case at low load: no grouping, no merge, no split
            return [self._execute_one(pb_utils, requests[0])]
        responses: list[Any] = [None] * len(requests)
        runnable: list[int] = []
        feeds_list: list[batching.Feeds] = []
        for index, request in enumerate(requests):
            feeds = self._feeds(pb_utils, request)
            problem = batching.request_error(feeds, self.inputs, self.batched)
            if problem is not None:
                responses[index] = self._error(pb_utils, problem)
                continue
            runnable.append(index)
            feeds_list.append(feeds)  # type: ignore[arg-type]
        for group in batching.group_requests(feeds_list, self.input_names, self.batched):
            self._run_group(pb_utils, group, feeds_list, [runnable[i] for i in group.indices], requests,
                            responses)
        return responses

    def _execute_one(self, pb_utils: Any, request: Any) -> Any:
        """One request alone: its own arrays in, the executor's outputs out."""
        feeds = self._feeds(pb_utils, request)
        problem = batching.request_error(feeds, self.inputs, self.batched)
        if problem is not None:
            return self._error(pb_utils, problem)
        started = time.perf_counter()
        try:
            outputs, stats = self.executor.run(feeds)  # type: ignore[arg-type]
        except (ExecutorError, RuntimeError, ValueError) as exc:
            return self._error(pb_utils, f"execution failed: {exc}")
        first = feeds[self.input_names[0]] if self.batched else None  # a model may have no inputs at all
        self._record(started, int(first.shape[0]) if first is not None else 1, stats)
        return self._response(pb_utils, request, outputs)

    def _feeds(self, pb_utils: Any, request: Any) -> dict[str, np.ndarray | None]:
        """The request's inputs as numpy views of its tensors in shared memory (no copy), None where
        one is missing."""
        feeds: dict[str, np.ndarray | None] = {}
        halves = self.bf16_inputs
        for name in self.input_names:
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            feeds[name] = None if tensor is None else (
                bfloat16.from_triton(tensor) if name in halves else tensor.as_numpy())
        for name in self.defaults:
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            if tensor is not None:
                feeds[name] = bfloat16.from_triton(tensor) if name in halves else tensor.as_numpy()
        for name in self.scalar_inputs:
            array = feeds.get(name)
            if array is not None and array.shape == (1,):
                feeds[name] = array.reshape(())
        for name in self.flat_inputs:
            array = feeds.get(name)
            if array is not None and array.ndim == 2 and array.shape[1] == 1:
                feeds[name] = array.reshape(array.shape[0])
        return feeds

    def _error(self, pb_utils: Any, message: str) -> Any:
        """A response carrying one clear error for its request, counted as a failure in telemetry."""
        if self.telemetry is not None:
            self.telemetry.failed()
        return pb_utils.InferenceResponse(
            error=pb_utils.TritonError(f"model {self.settings.model_name}: {message}"))

    def _response(self, pb_utils: Any, request: Any, outputs: dict[str, np.ndarray]) -> Any:
        """The outputs the request asked for (all when it named none), handed over without a copy: the
        Python backend copies each into shared memory once, as it sends the response."""
        if self.filter_outputs:
            wanted = request.requested_output_names()
            if wanted:
                outputs = {name: array for name, array in outputs.items() if name in wanted}
        if self.scalar_outputs:
            outputs = {name: array.reshape(1) if name in self.scalar_outputs else array
                       for name, array in outputs.items()}
        if self.flat_outputs:
            outputs = {name: array.reshape(array.shape[0], 1) if name in self.flat_outputs else array
                       for name, array in outputs.items()}
        if self.bf16_outputs:
            return pb_utils.InferenceResponse(output_tensors=[
                bfloat16.to_triton(pb_utils, name, array) if name in self.bf16_outputs
                else pb_utils.Tensor(name, array) for name, array in outputs.items()])
        return pb_utils.InferenceResponse(
            output_tensors=[pb_utils.Tensor(name, array) for name, array in outputs.items()])

    def _run_group(self, pb_utils: Any, group: batching.Group, feeds_list: list[batching.Feeds],
                   request_indices: list[int], requests: list[Any], responses: list[Any]) -> None:
        """One execution for a group of requests; a failure answers each of them with the error."""
        started = time.perf_counter()
        try:
            outputs, stats = self.executor.run(batching.merge(feeds_list, group, self.input_names))
        except (ExecutorError, RuntimeError, ValueError) as exc:
            for index in request_indices:
                responses[index] = self._error(pb_utils, f"execution failed: {exc}")
            return
        self._record(started, sum(group.sizes), stats)
        for index, piece in zip(request_indices, batching.split(outputs, group), strict=True):
            responses[index] = self._response(pb_utils, requests[index], piece)

    def _record(self, started: float, batch_size: int, stats: RunStats) -> None:
        """Account one execution in telemetry (never fails the request)."""
        if self.telemetry is not None:
            self.telemetry.executed(time.perf_counter() - started, batch_size, stats)

    def finalize(self) -> None:
        """Give the device memory back first (cheap, local), stop telemetry, then free the executor.

        Telemetry stops first: its thread reads the executor's device figures, which must never make
        a destroyed context current.
        """
        for ledger in getattr(self, "ledgers", ()):
            ledger.release(self.owner)
        executor, telemetry = getattr(self, "executor", None), getattr(self, "telemetry", None)
        try:
            if telemetry is not None:
                telemetry.close()
        finally:
            if executor is not None:
                executor.close()
