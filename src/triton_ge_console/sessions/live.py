"""A live session as views see it: a poller, its history, a controller and the server log."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from triton_ge_console.errors import InputError
from triton_ge_console.sessions.act.control import controller_for
from triton_ge_console.sessions.act.engine_control import EngineControl
from triton_ge_console.sessions.observe.engine_poller import EnginePoller
from triton_ge_console.sessions.observe.health import InstanceWatch, instance_watch
from triton_ge_console.sessions.observe.history import SnapshotHistory
from triton_ge_console.sessions.observe.poller import Poller
from triton_ge_console.sessions.observe.snapshot import Endpoints, ServerSnapshot
from triton_ge_console.sessions.observe.source import Controller
from triton_ge_console.sessions.observe.stats import EndpointError
from triton_ge_console.sessions.observe.telemetry.devices import DeviceTelemetry
from triton_ge_console.sessions.observe.trace import TRACE_FILE_NAME, TraceCollector, enable_tracing
from triton_ge_console.sessions.server.access import SessionReach, session_reach
from triton_ge_console.sessions.server.engines import TRITON, on_this_host
from triton_ge_console.sessions.server.token_header import TOKEN_HEADER

if TYPE_CHECKING:
    from triton_ge_console.sessions.server.registry import SessionRecord

# Where an operator points the console at a MindX DL npu-exporter (e.g. http://host:8082/metrics).
EXPORTER_ENV = "GE_NPU_EXPORTER_URL"


class LiveSource:
    """A SessionSource over a running server: `poll()` blocks (run it in a worker) and never raises."""

    def __init__(
        self,
        name: str,
        endpoints: Endpoints,
        *,
        controller: Controller | None = None,
        log_path: Path | None = None,
        started_at: float | None = None,
        token: str | None = None,
        token_header: str = TOKEN_HEADER,
        trace_file: Path | None = None,
        telemetry: DeviceTelemetry | None = None,
        history: SnapshotHistory | None = None,
        instances: InstanceWatch | None = None,
        sample_traces: bool = True,
        events_dir: Path | None = None,
        poller: Poller | EnginePoller | None = None,
    ) -> None:
        self.name = name
        self.endpoints = endpoints
        self.history = history if history is not None else SnapshotHistory()
        self._log_path = log_path
        self._token = token
        self._token_header = token_header
        self._controller = controller
        self.poller = poller or Poller(
            name, endpoints, started_at=started_at,
            headers={token_header: token} if token else None,
            trace=TraceCollector(trace_file) if trace_file is not None else None,
            telemetry=telemetry,
            instances=instances,
            sample_traces=sample_traces,
            events_dir=events_dir,
        )

    @classmethod
    def from_record(cls, record: SessionRecord, *, npu_smi: Path | str | None = "auto",
                    exporter_url: str | None = None, sample_traces: bool = True,
                    engine_timeout: float = 2.0) -> LiveSource:
        """The live source of a registered session (launched or attached).

        npu-smi is only asked about servers on this machine; the trace file is the session's own.
        `sample_traces=False` for a one-shot look: it reads traces there are, and arms no tracing.
        `engine_timeout`: how long a vLLM or MindIE server's each reply is waited for.
        """
        reach = session_reach(record)
        exporter = exporter_url or os.environ.get(EXPORTER_ENV) or None
        # an engine on this host (it binds loopback by default) has its NPUs read by npu-smi here, as Triton
        local = reach.local or (reach.engine != TRITON and on_this_host(reach.http_url))
        telemetry = DeviceTelemetry(npu_smi=npu_smi if local else None, exporter_url=exporter)
        if reach.engine != TRITON:
            return cls._of_engine(reach, telemetry, engine_timeout)
        return cls(
            reach.name,
            Endpoints(reach.http_url, reach.grpc_url, reach.metrics_url),
            log_path=reach.log_path,
            started_at=reach.started_at,
            controller=_session_controller(record, reach),
            token=reach.token,
            token_header=reach.token_header,
            trace_file=reach.session_dir / TRACE_FILE_NAME if reach.session_dir else None,
            telemetry=telemetry,
            instances=instance_watch(reach),
            sample_traces=sample_traces,
            events_dir=reach.session_dir,
        )

    @classmethod
    def _of_engine(cls, reach: SessionReach, telemetry: DeviceTelemetry, timeout: float) -> LiveSource:
        """The live source of an attached vLLM or MindIE server: its own poller, a controller that refuses
        model commands with the reason."""
        endpoints = Endpoints(reach.http_url, None, reach.metrics_url)
        poller = EnginePoller(reach.name, reach.engine, endpoints, headers=reach.headers() or None,
                              ca_file=reach.ca_file, timeout=timeout, telemetry=telemetry)
        return cls(reach.name, endpoints, controller=EngineControl(reach.engine), poller=poller)

    def poll(self) -> ServerSnapshot:
        """Take one snapshot and keep it in the history."""
        snapshot = self.poller.poll()
        self.history.append(snapshot)
        return snapshot

    def trace_model(self, model: str, rate: int = 10, log_frequency: int = 20) -> bool:
        """Sample `model`'s requests into the session's trace file at a fixed rate (the poller already
        samples every model without summaries, at a rate it adapts to the load, and may re-rate this one).

        False when this session has no trace file (an attached server) or Triton refused.
        """
        poller = self.poller
        if poller.trace is None or poller.http is None:
            return False
        try:
            enable_tracing(poller.http, model, rate, log_frequency)
        except (EndpointError, ValueError):
            return False
        finally:
            poller.http.close()
        return True

    @property
    def controller(self) -> Controller:
        """The session's controller (from a record), else a TritonControl made on first use."""
        if self._controller is None:
            from triton_ge_console.sessions.act.control import TritonControl

            if self.endpoints.http_url is None:
                raise InputError(f"session {self.name}: no HTTP endpoint to send commands to")
            self._controller = TritonControl(self.endpoints.http_url, self._token,
                                             token_header=self._token_header, log_path=self._log_path)
        return self._controller

    @property
    def log_path(self) -> Path | None:
        """The server log, when this machine has it."""
        return self._log_path

    @property
    def request_headers(self) -> dict[str, str]:
        """The headers this source's requests carry (its token), for commands sent beside it."""
        return {self._token_header: self._token} if self._token else {}

    def close(self) -> None:
        """Release connections; the server keeps running."""
        self.poller.close()


def _session_controller(record: SessionRecord, reach: SessionReach) -> Controller | None:
    """The record's SessionControl; None when its URL is unusable, so the error comes on use."""
    try:
        return controller_for(record, reach=reach)
    except ValueError:
        return None
