"""`ge-console devices`: what npu-smi, an npu-exporter and the GE glue report about each NPU."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from typing import TYPE_CHECKING, Any

from triton_ge_console.arg_types import error_line
from triton_ge_console.errors import GeConsoleError, InputError

# Imported where used: building the parser for `--help` must not load onnx, protobuf or clients.
if TYPE_CHECKING:
    from triton_ge_console.sessions.observe.metrics import MetricTable
    from triton_ge_console.sessions.observe.snapshot import DeviceSnapshot

EXPORTER_ENV = "GE_NPU_EXPORTER_URL"
COLUMNS = (
    "ID", "NAME", "KIND", "HEALTH", "POWER", "TEMP", "UTIL", "MEMORY", "NPU", "CHIP", "SOURCE", "ID-FROM",
)  # fmt: skip


def register(subparsers: Any) -> None:
    """Add the `devices` subcommand."""
    parser = subparsers.add_parser("devices", help="show NPU devices (npu-smi, npu-exporter, GE glue)")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    parser.add_argument("--session", "-s", metavar="NAME",
                        help="also read the GE glue metrics of this session (default: the only one running)")
    parser.add_argument("--metrics-url", metavar="URL", help="a Triton /metrics URL (the glue's ge_device_*)")
    parser.add_argument("--exporter-url", metavar="URL",
                        help=f"a MindX DL npu-exporter /metrics URL (default ${EXPORTER_ENV})")
    parser.add_argument("--npu-smi", metavar="PATH", help="the npu-smi binary (default: npu-smi on PATH)")
    parser.set_defaults(func=run_devices)


def run_devices(args: argparse.Namespace) -> int:
    """Print every device found; 1 when no source could be read at all."""
    from triton_ge_console.sessions.observe.telemetry.devices import DeviceTelemetry
    from triton_ge_console.sessions.server.registry import SessionStopped

    try:
        metrics_url = _metrics_url(args)
    except GeConsoleError as exc:  # a session not found or unreadable; anything else is a bug's traceback
        return error_line(str(exc), 1 if isinstance(exc, SessionStopped) else 2)
    telemetry = DeviceTelemetry(npu_smi=args.npu_smi or "auto",
                                exporter_url=args.exporter_url or os.environ.get(EXPORTER_ENV) or None)
    errors: dict[str, str] = {}
    table = _scrape(metrics_url, errors) if metrics_url else None
    devices = telemetry.devices(table, block=True)
    telemetry.close()
    errors.update(telemetry.errors)
    for source, message in errors.items():
        error_line(f"{source}: {message}")
    if not telemetry.has_external and metrics_url is None:
        return error_line("no telemetry source: npu-smi is not on PATH; give --exporter-url, --metrics-url "
                          "or --session")
    print(json.dumps([device_dict(d) for d in devices], indent=2) if args.json else format_table(devices))
    return 1 if errors and not devices else 0


def _metrics_url(args: argparse.Namespace) -> str | None:
    """The metrics URL to read glue figures from: explicit, the named session's, or the running one's."""
    if args.metrics_url:
        return str(args.metrics_url)
    from triton_ge_console.display import metrics_where
    from triton_ge_console.session_states import READY, STARTING
    from triton_ge_console.sessions.server.registry import (
        Registry,
        effective_state,
        require_running,
    )

    registry = Registry()
    if not args.session:
        try:
            record = registry.resolve(None)
        except GeConsoleError:  # no single running session: the external sources alone
            return None
        return record.metrics_url if effective_state(record) in (READY, STARTING) else None
    record = require_running(registry.load(args.session))
    if not record.metrics_url:
        raise InputError(f"session {record.name} has no metrics URL: metrics "
                         f"{metrics_where(None, record.name, record.attached, record.discovered_by)}")
    return record.metrics_url


def _scrape(url: str, errors: dict[str, str]) -> MetricTable | None:
    """Triton's metrics, or None with the reason recorded."""
    from triton_ge_console.sessions.observe.metrics import scrape_metrics
    from triton_ge_console.sessions.observe.stats import EndpointError, HttpEndpoint

    endpoint = HttpEndpoint(url, timeout=5.0)
    try:
        return scrape_metrics(endpoint)
    except (EndpointError, RuntimeError) as exc:
        errors["ge-glue"] = str(exc)
        return None
    finally:
        endpoint.close()


def device_dict(device: DeviceSnapshot) -> dict[str, Any]:
    """Plain data for --json."""
    return dataclasses.asdict(device)


def _cell(value: float | None, fmt: str) -> str:
    """A formatted figure, or '-' when unknown."""
    return "-" if value is None else fmt.format(value)


def _memory(device: DeviceSnapshot) -> str:
    """'used/total' in GiB (MiB where less), with '-' for unknown parts."""
    from triton_ge_console import display

    return display.memory(device.memory_used_bytes, device.memory_total_bytes).replace(display.MISSING, "-")


def _power(device: DeviceSnapshot) -> str:
    """Watts, marked 'card' when the figure is the board's (a 310P's), not this chip's."""
    text = _cell(device.power_w, "{:.1f} W")
    return f"{text} (card)" if device.power_note and device.power_w is not None else text


def format_table(devices: tuple[DeviceSnapshot, ...]) -> str:
    """A fixed-width table, one device per line."""
    if not devices:
        return "no devices found"
    rows = [COLUMNS] + [
        (d.id, d.name or "-", d.kind, d.health or "-", _power(d), _cell(d.temperature_c, "{:.0f} C"),
         _cell(None if d.utilization is None else d.utilization * 100, "{:.0f}%"), _memory(d),
         _cell(d.npu_id, "{}"), _cell(d.chip_id, "{}"), d.source or "-", d.id_source or "-")
        for d in devices
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    return "\n".join(lines)
