"""`ge-console demo`: the seed's llama_model and bert_model, built, served in CPU emulation, kept busy."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from triton_ge_console.arg_types import error_line
from triton_ge_console.session_states import READY
from triton_ge_console.sessions.loadgen.gentle import GentleLoad
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot
from triton_ge_console.sessions.pending import PendingSource, RecordLifecycle
from triton_ge_console.sessions.server import paths
from triton_ge_console.sessions.server.registry import Registry, SessionRecord, effective_state
from triton_ge_console.triton_terms import MODEL_READY

DEMO_NAME = "demo"
Notify = Callable[[str], None]


def demo_repository_dir() -> Path:
    """Where the demo repository is built: the state dir, so a second run reuses it."""
    return paths.state_dir() / "demo" / "repository"


def demo_thresholds() -> dict[str, dict[str, float]]:
    """The seed spec's console thresholds, per model."""
    from triton_ge_console.repository.build import seed_spec

    return {model.name: dict(model.thresholds) for model in seed_spec().models}


@dataclass
class DemoSession:
    """What the demo started, so quitting can stop exactly that."""

    registry: Registry
    lifecycle: RecordLifecycle
    pending: PendingSource
    load: GentleLoad | None = None
    stopped: bool = False
    launched_here: bool = False  # only a server this run started is stopped on quit
    notes: list[str] = field(default_factory=list)

    def start(self, say: Notify, rate_per_s: float = 4.0) -> SessionRecord:
        """Build the repository, launch (or reuse) the demo server, bind the source, start the load."""
        from triton_ge_console.repository.build import build_demo_repository
        from triton_ge_console.sessions.live import LiveSource

        repository = demo_repository_dir()
        say(f"building the demo repository in {repository} …")
        report = build_demo_repository(repository)
        say(f"repository ready: {', '.join(f'{c.name} {c.status}' for c in report.changes) or 'unchanged'}")
        record = self._launch_or_reuse(repository, say)
        self.lifecycle.record = record
        source = LiveSource.from_record(record)
        source.history = self.pending.history
        self.pending.bind(source)
        if record.grpc_url:
            say(f"starting a gentle background load ({rate_per_s:g} req/s per model) …")
            self.load = GentleLoad(record.grpc_url, record.models, rate_per_s).start()
        say(f"demo ready: {record.http_url}")
        return record

    def _launch_or_reuse(self, repository: Path, say: Notify) -> SessionRecord:
        """A running demo session (kept by --keep) is reused; otherwise launch one."""
        from triton_ge_console.sessions.launcher import LaunchOptions, launch

        if self.registry.exists(DEMO_NAME):
            existing = self.registry.load(DEMO_NAME)
            if effective_state(existing) == READY:
                say(f"reusing the running demo session at {existing.http_url}")
                return existing
        from triton_ge_console.repository.build import seed_spec

        say("starting tritonserver with the ge glue in CPU emulation …")
        server = seed_spec().server
        extra = ("--metrics-config=summary_latencies=true",) if server.summary_latencies else ()
        options = LaunchOptions(source=repository, name=DEMO_NAME, extra_args=extra)
        record = launch(options, self.registry, say)
        self.launched_here = True
        return record

    def close(self, keep: bool) -> str | None:
        """Stop the load and, unless kept or not started by this run, the server; returns what was done."""
        if self.stopped:
            return None
        self.stopped = True
        if self.load is not None:
            self.load.stop()
        self.pending.close()
        if self.lifecycle.record is None:
            return None
        if not self.launched_here:
            return f"left session '{DEMO_NAME}' running: this run reused it, it did not start it"
        if keep:
            return f"kept session '{DEMO_NAME}' running"
        return self.lifecycle.stop().message


def new_demo_session() -> DemoSession:
    """A demo session object, nothing started yet."""
    registry = Registry()
    return DemoSession(registry, RecordLifecycle(registry), PendingSource(DEMO_NAME))


def figures_moving(first: ServerSnapshot, latest: ServerSnapshot, models: tuple[str, ...]) -> bool:
    """Every model READY, with more successful requests than at first, and a request rate known."""
    for name in models:
        before, now = first.model(name), latest.model(name)
        if now is None or now.state != MODEL_READY or now.request_rate is None:
            return False
        before_total = before.success_total if before is not None and before.success_total else 0
        if (now.success_total or 0) <= before_total:
            return False
    return True


def run_headless(seconds: float, keep: bool, out: Callable[[str], None] | None = None,
                 rate_per_s: float = 4.0) -> int:
    """Run the demo without a terminal: wait until figures move, print the dashboard as text, stop (also
    when terminated: SIGTERM and SIGHUP unwind through the stop)."""
    from triton_ge_console.console.lifeline import SignalsUnwind
    from triton_ge_console.console.summary import dashboard_text
    from triton_ge_console.sessions.launcher import LaunchError

    say = out or (lambda line: print(line, flush=True))
    session = new_demo_session()
    started = time.monotonic()
    with SignalsUnwind() as signals:
        try:
            record = session.start(say, rate_per_s)
            ok, snapshot = _wait_for_moving_figures(session.pending, record.models, started + seconds)
            say(dashboard_text(snapshot, session.pending.history, demo_thresholds()).rstrip())
            if not ok:
                return error_line(f"figures did not move within {seconds:g}s; see {record.log_path}")
            say(f"demo live in {time.monotonic() - started:.1f}s: models READY and serving requests")
            return 0
        except LaunchError as exc:
            return error_line(str(exc))
        finally:
            try:
                signals.settle()
            finally:  # even should a signal land in settle() itself
                with contextlib.suppress(Exception):
                    message = session.close(keep)
                    if message:
                        say(message)


def _wait_for_moving_figures(source: PendingSource, models: tuple[str, ...],
                             deadline: float) -> tuple[bool, ServerSnapshot]:
    """Poll once a second until every model serves requests, or the deadline passes."""
    tick = threading.Event()
    first = source.poll()
    latest = first
    while time.monotonic() < deadline:
        tick.wait(1.0)
        latest = source.poll()
        if figures_moving(first, latest, models):
            return True, latest
    return False, latest
