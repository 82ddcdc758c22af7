"""NPU telemetry merged per device from the GE glue's `ge_device_*` metrics, npu-smi and an npu-exporter.

npu-smi and the exporter are slow (npu-smi takes a second per call on real cards), so they refresh in a
background thread at most every `min_interval_s`; a poll only reads the latest readings.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from triton_ge_console.npu_smi import NpuSmiError, find_npu_smi
from triton_ge_console.sessions.observe.metrics import MetricTable
from triton_ge_console.sessions.observe.snapshot import DeviceSnapshot
from triton_ge_console.sessions.observe.stats import EndpointError, HttpEndpoint
from triton_ge_console.sessions.observe.telemetry.exporter import map_to_logical, read_exporter
from triton_ge_console.sessions.observe.telemetry.npu_smi import read_npu_smi

GLUE_SOURCE = "ge-glue"
GLUE_UTILIZATION = "ge_device_utilization_ratio"
GLUE_MEMORY_USED = "ge_device_memory_used_bytes"
GLUE_MEMORY_TOTAL = "ge_device_memory_total_bytes"
MERGED_FIELDS = ("name", "utilization", "memory_used_bytes", "memory_total_bytes", "temperature_c",
                 "power_w", "health", "npu_id", "chip_id", "logical_id", "phy_id", "bus_id", "id_source",
                 "power_note")


def devices_from_glue(table: MetricTable | None) -> list[DeviceSnapshot]:
    """Devices the GE glue reports in Triton's /metrics (labels `device`, `kind`)."""
    if table is None:
        return []
    figures: dict[str, dict[str, float]] = {}
    kinds: dict[str, str] = {}
    for metric in (GLUE_UTILIZATION, GLUE_MEMORY_USED, GLUE_MEMORY_TOTAL):
        for sample in table.samples(metric):
            device = sample.label("device")
            if device is None or sample.value != sample.value:  # NaN: the glue cannot know it now
                continue
            figures.setdefault(device, {})[metric] = sample.value
            kinds.setdefault(device, sample.label("kind") or "npu")
    return [
        DeviceSnapshot(
            id=device,
            kind=kinds[device],
            utilization=values.get(GLUE_UTILIZATION),
            memory_used_bytes=_int_or_none(values.get(GLUE_MEMORY_USED)),
            memory_total_bytes=_int_or_none(values.get(GLUE_MEMORY_TOTAL)),
            source=GLUE_SOURCE,
            logical_id=int(device) if device.isdigit() else None,
            id_source="ge-glue (the AscendCL device id it runs on)" if device.isdigit() else None,
        )
        for device, values in sorted(figures.items(), key=lambda item: _device_order(item[0]))
    ]


def _int_or_none(value: float | None) -> int | None:
    """An int byte count, or None."""
    return None if value is None else int(value)


def _device_order(device_id: str) -> tuple[int, str]:
    """Numeric ids in numeric order."""
    return (int(device_id), "") if device_id.isdigit() else (1 << 30, device_id)


def merge_devices(*sources: Iterable[DeviceSnapshot]) -> tuple[DeviceSnapshot, ...]:
    """One snapshot per device id: each field from the first source that has it; `source` names them all."""
    merged: dict[str, DeviceSnapshot] = {}
    for source in sources:
        for device in source:
            known = merged.get(device.id)
            merged[device.id] = device if known is None else _fill(known, device)
    return tuple(merged[k] for k in sorted(merged, key=_device_order))


def _fill(known: DeviceSnapshot, extra: DeviceSnapshot) -> DeviceSnapshot:
    """`known` with its missing fields taken from `extra`, and extra's source added if it helped."""
    updates = {f: getattr(extra, f) for f in MERGED_FIELDS
               if getattr(known, f) is None and getattr(extra, f) is not None}
    if not updates:
        return known
    names = [n for n in (known.source or "").split("+") if n]
    if extra.source and extra.source not in names:
        names.append(extra.source)
    return dataclasses.replace(known, **updates, source="+".join(names) or None)


class DeviceTelemetry:
    """Merged device readings for one session: glue metrics every poll, external tools in the background."""

    def __init__(self, npu_smi: Path | str | None = "auto", exporter_url: str | None = None,
                 min_interval_s: float = 5.0, timeout: float = 15.0) -> None:
        self.npu_smi = find_npu_smi() if npu_smi == "auto" else (Path(npu_smi) if npu_smi else None)
        self.exporter = HttpEndpoint(exporter_url, timeout=min(timeout, 5.0)) if exporter_url else None
        self.min_interval_s = min_interval_s
        self.timeout = timeout
        self.errors: dict[str, str] = {}  # source -> why its last reading failed
        self._external: dict[str, list[DeviceSnapshot]] = {}
        self._read_at = float("-inf")
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None

    @property
    def has_external(self) -> bool:
        """Whether npu-smi or an exporter is configured."""
        return self.npu_smi is not None or self.exporter is not None

    def refresh(self) -> None:
        """Read npu-smi and the exporter now (blocking)."""
        readings: dict[str, list[DeviceSnapshot]] = {}
        errors: dict[str, str] = {}
        if self.npu_smi is not None:
            _collect("npu-smi", lambda: read_npu_smi(self.npu_smi, self.timeout), readings, errors)  # type: ignore[arg-type]
        if self.exporter is not None:
            _collect("npu-exporter", lambda: read_exporter(self.exporter), readings, errors)  # type: ignore[arg-type]
            if "npu-exporter" in readings:
                smi = readings.get("npu-smi", [])
                readings["npu-exporter"] = map_to_logical(readings["npu-exporter"], smi)
        with self._lock:
            self._external, self.errors, self._read_at = readings, errors, time.monotonic()

    def _refresh_in_background(self) -> None:
        """Start one background refresh when readings are stale and none is running."""
        with self._lock:
            stale = time.monotonic() - self._read_at >= self.min_interval_s
            busy = self._worker is not None and self._worker.is_alive()
            if not stale or busy:
                return
            self._worker = threading.Thread(target=self.refresh, name="ge-telemetry", daemon=True)
            self._worker.start()

    def devices(self, metrics: MetricTable | None, block: bool = False) -> tuple[DeviceSnapshot, ...]:
        """Merged devices: glue first (the serving process's view), then npu-smi, then the exporter."""
        if self.has_external:
            if block:
                self.refresh()
            else:
                self._refresh_in_background()
        with self._lock:
            external = dict(self._external)
        return merge_devices(devices_from_glue(metrics), external.get("npu-smi", ()),
                             external.get("npu-exporter", ()))

    def close(self) -> None:
        """Wait briefly for a running refresh and close the exporter connection."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout=self.timeout)
        if self.exporter is not None:
            self.exporter.close()


def _collect(name: str, read: Callable[[], list[DeviceSnapshot]], readings: dict[str, list[DeviceSnapshot]],
             errors: dict[str, str]) -> None:
    """Run one reader, recording its devices or its error."""
    try:
        readings[name] = read()
    except (NpuSmiError, EndpointError, ValueError, RuntimeError) as exc:
        errors[name] = str(exc)
