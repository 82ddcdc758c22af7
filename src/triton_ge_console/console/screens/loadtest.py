"""A load test on one model (concurrency, duration) with live progress, run by the sessions load generator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Log, ProgressBar

from triton_ge_console.console import format as fmt

if TYPE_CHECKING:
    from triton_ge_console.sessions.loadgen.run import LoadRun
    from triton_ge_console.sessions.loadgen.types import BenchRow, Progress

WINDOW_MS = 1000
HINT = "Enter or Start runs the test · Esc stops it and closes this dialog"


def progress_line(progress: Progress) -> str:
    """One live line per measured window."""
    window = f"window {progress.window}/{progress.max_windows}"
    rate = fmt.number(progress.window_throughput_rps)
    p50 = fmt.number(progress.window_p50_ms, 2)
    return (f"{progress.elapsed_s:5.1f}s  {progress.phase:<9} {window}  {rate} req/s  p50 {p50} ms  "
            f"ok {progress.completed}  errors {progress.errors}")


def result_line(row: BenchRow) -> str:
    """The finished run, with Triton's own queue/compute split."""
    return (f"done: {row.throughput_rps:.1f} req/s, p50 {fmt.number(row.p50_ms, 2)} ms, "
            f"p99 {fmt.number(row.p99_ms, 2)} ms, {row.requests} requests, {row.errors} errors, "
            f"{row.rejected} refused (queue full), {row.timed_out} timed out in the queue; "
            f"server queue {fmt.number(row.server_queue_ms, 2)} ms, "
            f"compute {fmt.number(row.server_compute_ms, 2)} ms"
            + (f"; first error: {row.first_error}" if row.first_error else ""))


class LoadTestScreen(ModalScreen[None]):
    """Asks concurrency and duration, then runs and shows each window as it completes."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "stop and close")]

    def __init__(self, model: str, grpc_hostport: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.model = model
        self.grpc_hostport = grpc_hostport
        self.headers = dict(headers or {})  # gRPC metadata: the session's token, if it has one
        self.run: LoadRun | None = None

    def compose(self) -> ComposeResult:
        """Options, start button, progress, log."""
        with Vertical(id="loadtest-box"):
            yield Label(Text(f"Load test {self.model} over gRPC {self.grpc_hostport}", style="bold"))
            with Horizontal(id="loadtest-options"):
                yield Label("concurrency")
                yield Input("4", id="concurrency", type="integer")
                yield Label("seconds")
                yield Input("10", id="duration", type="integer")
                yield Button("Start", variant="primary", id="start")
            yield Label(HINT, id="loadtest-hint")
            yield ProgressBar(id="loadtest-progress", show_eta=False)
            yield Log(id="loadtest-log")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Start the run."""
        if event.button.id == "start":
            self.start()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in a field starts the run, as the Start button does."""
        event.stop()
        self.start()

    def start(self) -> None:
        """Validate the options and begin the run in the background."""
        from triton_ge_console.sessions.loadgen.inputs import LoadSpecError
        from triton_ge_console.sessions.loadgen.run import LoadRun
        from triton_ge_console.sessions.loadgen.types import LoadSpec

        if self.run is not None and self.run.running:
            return
        try:
            concurrency = int(self.query_one("#concurrency", Input).value)
            seconds = int(self.query_one("#duration", Input).value)
            spec = LoadSpec(model=self.model, url=self.grpc_hostport, protocol="grpc",
                            concurrency=(concurrency,), window_ms=WINDOW_MS, warmup_ms=500,
                            max_windows=seconds, stable_windows=seconds, headers=self.headers)
            spec.validate()
        except (ValueError, LoadSpecError) as exc:
            self.notify(str(exc), title="load test", severity="error")
            return
        self.query_one(ProgressBar).update(total=seconds, progress=0)
        self.query_one(Log).write_line(f"starting: concurrency {concurrency}, {seconds}s")
        self.run = LoadRun(spec, progress=lambda p: self.app.call_from_thread(self._progress, p)).start()

    def _progress(self, progress: Progress) -> None:
        """One progress record, on the UI thread."""
        bar = self.query_one(ProgressBar)
        if progress.phase == "done" and bar.total is not None:
            bar.update(progress=bar.total)  # "done" carries no window count: the run is complete
        elif progress.phase in ("measuring", "step-done"):
            bar.update(progress=progress.window)
        log = self.query_one(Log)
        if progress.row is not None:
            log.write_line(result_line(progress.row))
        elif progress.phase in ("measuring", "warmup", "connecting"):
            log.write_line(progress_line(progress))
        if progress.phase in ("done", "stopped"):
            error = self.run.error if self.run is not None else None
            log.write_line(f"run {progress.phase}" + (f": {error}" if error else ""))

    def on_unmount(self) -> None:
        """Never leave a run going."""
        if self.run is not None:
            self.run.stop()

    def action_close(self) -> None:
        """Stop the run, close the dialog."""
        if self.run is not None:
            self.run.stop()
        self.dismiss(None)
