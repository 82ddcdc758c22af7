"""The glue's figures in Triton's own /metrics, through Python-backend custom metrics.

The hot path only adds to plain counters under a lock; the glue's flusher thread (`flusher.MetricFlusher`)
hands them to Triton every half second (each metric call is an IPC round trip to the server) and refreshes
the device gauges from the shared ledger (or from AscendCL on a real NPU).
"""

from __future__ import annotations

import collections
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from triton_ge_console.backend_glue.executor import DeviceFigures, RunStats
from triton_ge_console.backend_glue.flusher import MetricFlusher
from triton_ge_console.backend_glue.ledger import DeviceLedger
from triton_ge_console.backend_glue.settings import GlueSettings

UTILIZATION_WINDOW_S = 5.0

# name → (kind, help); kind is "counter" | "gauge". Executions per batch size are _BatchSizes.
FAMILIES: dict[str, tuple[str, str]] = {
    "ge_device_utilization_ratio": ("gauge", "Busy fraction of the device over the last seconds (0..1); NaN "
                                    "while an npu_ge model over several NPUs runs in emulation (which NPU "
                                    "ran each execution is its scheduler's choice, unknown)"),
    "ge_device_memory_used_bytes": ("gauge", "Device memory held by loaded models"),
    "ge_device_memory_total_bytes": ("gauge", "Device memory capacity (configured for an emulated device)"),
    "ge_execution_duration_us": ("counter", "Cumulative execution time of the model (microseconds)"),
    "ge_executions_total": ("counter", "Executions of the model (one per batch)"),
    "ge_inferences_total": ("counter", "Batch items executed by the model"),
    "ge_request_failures_total": ("counter", "Requests the glue answered with an error; Triton 2.47 and "
                                  "later count a Python backend's error responses as successes"),
    "ge_request_failures_at_load": ("gauge", "ge_request_failures_total when the model was last loaded (the "
                                    "series carries on across loads, Triton's own counters start afresh)"),
    "ge_h2d_bytes_total": ("counter", "Bytes copied host to device"),
    "ge_d2h_bytes_total": ("counter", "Bytes copied device to host"),
    "ge_model_info": ("gauge", "1 per loaded model instance group, labelled with its execution mode"),
    "ge_model_memory_bytes": ("gauge", "Device memory one model instance is charged on the device (npu_ge: "
                              "its part of the model's full copies on every NPU of device_ids)"),
}


@dataclass
class _Pending:
    """Work done since the last flush."""

    executions: int = 0
    inferences: int = 0
    duration_us: float = 0.0
    h2d: int = 0
    d2h: int = 0
    busy_s: float = 0.0
    batch_sizes: dict[int, int] = field(default_factory=dict)  # executions per batch size


class _BatchSizes:
    """Executions per batch size: a counter per size, incremented once per size a flush saw. A histogram
    took one observe() per execution (the Python backend has no batched form), an IPC round trip of
    ~75 us of stub and server CPU each, per request at concurrency 1 (issue 44); the counters hold the
    same distribution, exactly."""

    def __init__(self, pb_utils: Any, labels: dict[str, str]) -> None:
        self._labels = labels
        self._counters: dict[int, Any] = {}
        self._family = pb_utils.MetricFamily(name="ge_execution_batch_size_total",
                                             kind=pb_utils.MetricFamily.COUNTER,
                                             description="Executions per batch size")

    def record(self, sizes: dict[int, int]) -> None:
        """Add executions: how many of each batch size."""
        for size, count in sizes.items():
            if size not in self._counters:
                self._counters[size] = self._family.Metric(labels={**self._labels, "batch_size": str(size)})
            self._counters[size].increment(count)


Sample = tuple[float, float, float]  # (time, cumulative busy, cumulative unplaced busy) of one device


def unplaced(samples: collections.deque[Sample]) -> bool:
    """Whether busy time that may have been this device's or another's came in over the samples."""
    return len(samples) >= 2 and samples[-1][2] > samples[0][2]


def utilization(samples: collections.deque[Sample]) -> float | None:
    """Busy fraction between the oldest and newest sample, clamped to 0..1; None with fewer than two, or
    when unplaced busy time came in between (how much of it was this device's cannot be told)."""
    if len(samples) < 2 or unplaced(samples):
        return None
    (t0, b0, _), (t1, b1, _) = samples[0], samples[-1]
    if t1 <= t0:
        return None
    return min(1.0, max(0.0, (b1 - b0) / (t1 - t0)))


class _DeviceGauges:
    """One NPU's gauges, from its ledger (and AscendCL's own figures, where they apply)."""

    def __init__(self, ledger: DeviceLedger, gauges: dict[str, Any], figures: Any = None) -> None:
        self.ledger = ledger
        self.gauges = gauges
        self.figures = figures  # callable returning DeviceFigures | None (AscendCL), or None
        self.samples: collections.deque[Sample] = collections.deque()

    def refresh(self, own_figures: bool = True) -> None:
        """Set the gauges: AscendCL's own figures when present (and asked for), else the shared ledger."""
        usage = self.ledger.usage()
        now = time.monotonic()
        self.samples.append((now, usage.busy_seconds, usage.unplaced_seconds))
        while len(self.samples) > 2 and now - self.samples[1][0] >= UTILIZATION_WINDOW_S:
            self.samples.popleft()
        asked = self.figures() if self.figures and own_figures else None
        figures: DeviceFigures = asked or DeviceFigures()
        used = usage.used_bytes if figures.used_bytes is None else figures.used_bytes
        total = usage.capacity_bytes if figures.total_bytes is None else figures.total_bytes
        # busy time measured at execute's edges first: AscendCL's own rate can only be read between this
        # process's executions (pyACL holds the GIL through each), so under load it misses them
        measured = utilization(self.samples)
        util = measured if measured is not None or unplaced(self.samples) else figures.utilization
        self.gauges["ge_device_memory_used_bytes"].set(float(used))
        self.gauges["ge_device_memory_total_bytes"].set(float(total))
        if util is not None:
            self.gauges["ge_device_utilization_ratio"].set(util)
        elif unplaced(self.samples):  # unknown now: not the last figure left standing
            self.gauges["ge_device_utilization_ratio"].set(math.nan)

    def leave(self, kind: str) -> None:
        """Refresh as an ending instance: the others' memory, and, where no model is left on the NPU to
        refresh its utilization, what is known of it now (Triton keeps an ended stub's series at its last
        value): an emulated NPU runs only the glue's models, so it idles at 0; a real one may be busy with
        another process's work, unknown here (NaN, which npu-smi's figure then stands in for)."""
        self.refresh(own_figures=False)
        if not self.ledger.usage().models:
            self.gauges["ge_device_utilization_ratio"].set(0.0 if kind == "cpu-emulated" else math.nan)


class Telemetry:
    """One instance's metrics: per-model counters, the gauges of each of its NPUs, and the flusher thread.

    An instance may span several NPUs: each holds what GlueSettings.memory_per_device charges it (the
    ledgers), and `ge_model_info` names every one of them, so the console shows the model on each. A ge
    one in the tensor-parallel what-if runs each execution on all of them: each is busy for it. An npu_ge
    one runs each on instance_exec_blocks (1) of its GE sessions, the least loaded over its NPUs, chosen at
    run time (hicann/triton-inference-server-ge-backend scheduler.cpp GetIdleInstances, inference.cpp
    BatchSplicTasks): which NPU was busy is not known, so its busy time goes to each ledger as unplaced
    and their utilization is unknown (NaN) while it runs.
    """

    def __init__(self, pb_utils: Any, settings: GlueSettings, ledgers: tuple[DeviceLedger, ...],
                 device_figures: Any = None, memory_share: int | None = None) -> None:
        self._pb = pb_utils
        self._lock = threading.Lock()
        self._pending = _Pending()
        self._families = {name: self._family(name, kind, text) for name, (kind, text) in FAMILIES.items()}
        model_labels = {"model": settings.model_name, "version": settings.version_dir.name,
                        "device": str(settings.device_id), "kind": settings.kind}
        self._model = {name: self._metric(name, model_labels) for name in FAMILIES
                       if name.startswith("ge_") and not name.startswith(("ge_device_", "ge_model_"))}
        self._devices = [self._device_gauges(ledger, settings.kind, device_figures if i == 0 else None)
                         for i, ledger in enumerate(ledgers)]
        # npu_ge over several NPUs, or over every NPU without knowing how many: whose busy time is unknown
        self._placed = settings.backend != "npu_ge" or (len(ledgers) == 1 and not settings.npus_unknown)
        self._note_failures_at_load()
        self._batch_sizes = _BatchSizes(pb_utils, model_labels)
        self._named = (settings.model_name, settings.instance_name)
        self._kind = settings.kind
        self._memory: list[tuple[DeviceLedger, Any]] = []  # each NPU's ledger and ge_model_memory_bytes
        for ledger in ledgers:
            info_labels = {**model_labels, "device": str(ledger.device), "backend": settings.backend,
                           "execution_mode": settings.kind}
            self._metric("ge_model_info", info_labels).set(1.0)
            if memory_share is not None:
                labels = {**model_labels, "device": str(ledger.device), "instance": settings.instance_name}
                self._memory.append((ledger, self._metric("ge_model_memory_bytes", labels)))
                self._memory[-1][1].set(float(memory_share))
        self.refresh_device()
        self._flusher = MetricFlusher(pb_utils.Logger, "telemetry", self._step, self.flush, "ge-telemetry")

    def _family(self, name: str, kind: str, text: str) -> Any:
        """Register (or join) one metric family with Triton."""
        kinds = {"counter": self._pb.MetricFamily.COUNTER, "gauge": self._pb.MetricFamily.GAUGE}
        return self._pb.MetricFamily(name=name, description=text, kind=kinds[kind])

    def _metric(self, name: str, labels: dict[str, str]) -> Any:
        """One labelled series of a family."""
        return self._families[name].Metric(labels=labels)

    def _device_gauges(self, ledger: DeviceLedger, kind: str, figures: Any) -> _DeviceGauges:
        """The three gauges of one NPU."""
        labels = {"device": str(ledger.device), "kind": kind}
        gauges = {name: self._metric(name, labels) for name in FAMILIES if name.startswith("ge_device_")}
        return _DeviceGauges(ledger, gauges, figures)

    def executed(self, seconds: float, batch_size: int, stats: RunStats) -> None:
        """Account one execution (hot path: no IPC here)."""
        with self._lock:
            pending = self._pending
            pending.executions += 1
            pending.inferences += batch_size
            pending.duration_us += seconds * 1e6
            pending.h2d += stats.h2d_bytes
            pending.d2h += stats.d2h_bytes
            # the device's own time where the executor measured it at execute's edges (AscendCL), else the run
            pending.busy_s += seconds if stats.device_seconds is None else stats.device_seconds
            pending.batch_sizes[batch_size] = pending.batch_sizes.get(batch_size, 0) + 1

    def _note_failures_at_load(self) -> None:
        """Where the failure count stands as this load begins, so this load's failures can be told apart."""
        try:
            self._model["ge_request_failures_at_load"].set(self._model["ge_request_failures_total"].value())
        except Exception as exc:  # telemetry must never take the model down
            self._pb.Logger.log_warn(f"ge glue telemetry: {exc}")

    def failed(self) -> None:
        """Count one error response now, before Triton counts it as a success (so the console, which
        subtracts the one from the other, never sees more successes than there were); never raises."""
        try:
            self._model["ge_request_failures_total"].increment(1.0)
        except Exception as exc:  # telemetry must never take the model down
            self._pb.Logger.log_warn(f"ge glue telemetry: {exc}")

    def flush(self) -> None:
        """Push pending work to Triton's counters and the device's busy time."""
        with self._lock:
            pending, self._pending = self._pending, _Pending()
        if pending.executions == 0:
            return
        self._model["ge_executions_total"].increment(pending.executions)
        self._model["ge_inferences_total"].increment(pending.inferences)
        self._model["ge_execution_duration_us"].increment(pending.duration_us)
        if pending.h2d:
            self._model["ge_h2d_bytes_total"].increment(pending.h2d)
        if pending.d2h:
            self._model["ge_d2h_bytes_total"].increment(pending.d2h)
        for device in self._devices:
            device.ledger.add_busy(pending.busy_s, self._placed)
        self._batch_sizes.record(pending.batch_sizes)

    def refresh_device(self) -> None:
        """Set the gauges of every NPU of the instance."""
        for device in self._devices:
            device.refresh()

    def _step(self) -> None:
        """One round of the flusher: the buffered figures, then the device gauges."""
        self.flush()
        self.refresh_device()

    def close(self) -> None:
        """Stop the flusher after a last flush, then say what the NPUs hold without this instance (its
        ledger entries were released first). Triton keeps every series an ended stub held, at its last
        value, for as long as it runs (deleting a stub's family instead crashed Triton 2.51: "malloc():
        unaligned fastbin chunk detected"), so an unloaded model's memory, and the utilization of an NPU it
        leaves idle, would read as they were forever."""
        self._flusher.close()
        try:
            for ledger, metric in self._memory:  # 0, or what a reload's new instance of this name holds
                metric.set(float(ledger.held(*self._named)))
            for device in self._devices:  # the other models' share; AscendCL's figure still counts ours
                device.leave(self._kind)
        except Exception as exc:  # telemetry must never keep a model from unloading
            self._pb.Logger.log_warn(f"ge glue telemetry: {exc}")
