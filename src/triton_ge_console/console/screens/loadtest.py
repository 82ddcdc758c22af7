"""A load test on one model (concurrency, duration) with live progress, run by the sessions load generator;
for a generate model, token streams (`bench --generate`'s engine) with their figures in a table and one
stream's text as it arrives."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Label, Log, ProgressBar, Static

from triton_ge_console.display import number

if TYPE_CHECKING:
    from triton_ge_console.sessions.loadgen.generate_bench import GenerateLoad, GenerateRow
    from triton_ge_console.sessions.loadgen.generate_client import StreamResult
    from triton_ge_console.sessions.loadgen.run import LoadRun
    from triton_ge_console.sessions.loadgen.types import BenchRow, Progress
    from triton_ge_console.sessions.loadgen.vs_direct import VsDirectReport, VsDirectSpec

WINDOW_MS = 1000
HINT = "Enter or Start runs the test · vs direct compares it with its own executor · Esc stops and closes"
STREAM_HINT = "Enter or Start streams generations on that many streams · Esc stops and closes"
STREAM_COLUMNS = ("", "seconds", "requests", "errors", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms",
                  "ITL p99 ms", "output tok/s", "req/s")

STREAM_TEXT = 400  # the end of one stream's text shown (its newest characters)
STREAM_IDS = 24  # or of its token ids, from a model without a tokenizer


class StreamFigures(Message):
    """A token-stream run's figures so far, or its final ones (from its worker thread)."""

    def __init__(self, row: GenerateRow, final: bool = False) -> None:
        super().__init__()
        self.row = row
        self.final = final


def stream_cells(row: GenerateRow, label: str) -> tuple[str, ...]:
    """One row of the token figures, in STREAM_COLUMNS' order ("—" where nothing was measured)."""
    return (label, f"{row.duration_s:.1f}", str(row.requests), str(row.errors),
            number(row.ttft_ms["p50"], 2), number(row.ttft_ms["p99"], 2),
            number(row.itl_ms["p50"], 2), number(row.itl_ms["p99"], 2),
            number(row.output_tokens_per_s, 1), number(row.requests_per_s, 2))


class StreamText(Message):
    """One stream's generation gained tokens (from its worker thread)."""


def stream_text_line(result: StreamResult | None, model: str) -> str:
    """What one stream has received so far: the end of its text, or of its ids when the model has no
    tokenizer (its responses carry no text_output)."""
    if result is None or not result.tokens:
        return "one stream: waiting for its first token"
    if result.with_text:
        return f"one stream's text: {result.text[-STREAM_TEXT:]}"
    ids = " ".join(str(token) for token in result.tokens[-STREAM_IDS:])
    return f"one stream: {model} has no tokenizer, so token ids: {ids}"


class VsDirectProgress(Message):
    """A line of the comparison's progress (from its worker thread)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class VsDirectFinished(Message):
    """The comparison's report, or the one line saying why there is none."""

    def __init__(self, report: VsDirectReport | None, error: str | None = None) -> None:
        super().__init__()
        self.report = report
        self.error = error


def progress_line(progress: Progress) -> str:
    """One live line per measured window."""
    window = f"window {progress.window}/{progress.max_windows}"
    rate = number(progress.window_throughput_rps)
    p50 = number(progress.window_p50_ms, 2)
    return (f"{progress.elapsed_s:5.1f}s  {progress.phase:<9} {window}  {rate} req/s  p50 {p50} ms  "
            f"ok {progress.completed}  errors {progress.errors}")


def result_line(row: BenchRow) -> str:
    """The finished run, with Triton's own queue/compute split."""
    return (f"done: {row.throughput_rps:.1f} req/s, p50 {number(row.p50_ms, 2)} ms, "
            f"p99 {number(row.p99_ms, 2)} ms, {row.requests} requests, {row.errors} errors, "
            f"{row.rejected} refused (queue full), {row.timed_out} timed out in the queue; "
            f"server queue {number(row.server_queue_ms, 2)} ms, "
            f"compute {number(row.server_compute_ms, 2)} ms"
            + (f"; first error: {row.first_error}" if row.first_error else ""))


class LoadTestScreen(ModalScreen[None]):
    """Asks concurrency and duration, then runs and shows each window as it completes."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "stop and close")]

    def __init__(self, model: str, grpc_hostport: str, headers: Mapping[str, str] | None = None,
                 vs_direct: VsDirectSpec | None = None, generate: bool = False) -> None:
        super().__init__()
        self.generate = generate  # a generate model: load it with token streams, not single inferences
        self._stop: threading.Event | None = None  # a token-stream run's, set to end it early
        self.model = model
        self.grpc_hostport = grpc_hostport
        self.headers = dict(headers or {})  # gRPC metadata: the session's token, if it has one
        self.vs_direct_spec = vs_direct  # None when the served repository is not known here
        self.run: LoadRun | None = None
        self.watched: StreamResult | None = None  # the generation whose tokens show as they arrive
        self._text_due = threading.Event()  # a StreamText is posted and not yet shown: no other is posted

    def compose(self) -> ComposeResult:
        """Options, start button, progress, log."""
        with Vertical(id="loadtest-box"):
            kind = " (token streams)" if self.generate else ""
            title = f"Load test {self.model} over gRPC {self.grpc_hostport}{kind}"
            yield Label(Text(title, style="bold"))
            with Horizontal(id="loadtest-options"):
                yield Label("streams" if self.generate else "concurrency")
                yield Input("4", id="concurrency", type="integer")
                yield Label("seconds")
                yield Input("10", id="duration", type="integer")
                yield Button("Start", variant="primary", id="start")
                comparable = self.vs_direct_spec is not None and not self.generate
                yield Button("vs direct", id="vs-direct", disabled=not comparable,
                             tooltip="what Triton adds: latency at each batch and maximum throughput, "
                                     "direct and through Triton over each protocol")
            yield Label(STREAM_HINT if self.generate else HINT, id="loadtest-hint")
            yield ProgressBar(id="loadtest-progress", show_eta=False)
            figures: DataTable[Text] = DataTable(id="stream-figures", show_cursor=False)
            figures.display = self.generate
            yield figures
            text = Static("", id="stream-text", markup=False)
            text.display = self.generate
            yield text
            yield Log(id="loadtest-log")
            yield Label("", id="vs-direct-latency-title", classes="vs-direct")
            yield DataTable(id="vs-direct-latency", classes="vs-direct", show_cursor=False)
            yield Label("", id="vs-direct-throughput-title", classes="vs-direct")
            yield DataTable(id="vs-direct-throughput", classes="vs-direct", show_cursor=False)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Start the run, or the comparison."""
        if event.button.id == "start":
            self.start()
        elif event.button.id == "vs-direct":
            self.start_vs_direct()

    def start_vs_direct(self) -> None:
        """Measure the model directly and through Triton, once at a time, off the UI thread."""
        if self.vs_direct_spec is None:
            self.notify("the served repository is not known here, so its executor cannot be opened",
                        title="vs direct", severity="warning")
            return
        if self.generate:
            self.notify("a generate model streams tokens: its load test is Start's token streams",
                        title="vs direct", severity="warning")
            return
        if self.comparing or self.streaming or (self.run is not None and self.run.running):
            return
        self.query_one("#vs-direct", Button).disabled = True
        self.query_one(ProgressBar).update(total=self.vs_direct_spec.rounds + 1, progress=0)
        self.query_one(Log).write_line(f"vs direct: {self.model}, {self.vs_direct_spec.rounds} round(s), "
                                       f"batch {', '.join(map(str, self.vs_direct_spec.batches))}")
        self._measure_vs_direct(self.vs_direct_spec)

    @property
    def comparing(self) -> bool:
        """Whether the comparison's worker is under way."""
        return any(w.group == "vs-direct" and w.is_running for w in self.workers)

    @work(thread=True, group="vs-direct", exclusive=True, exit_on_error=False)
    def _measure_vs_direct(self, spec: VsDirectSpec) -> None:
        """The library's measurement; its lines and its report come back as messages."""
        from triton_ge_console.sessions.loadgen.inputs import LoadSpecError
        from triton_ge_console.sessions.loadgen.transport import LoadError
        from triton_ge_console.sessions.loadgen.vs_direct import measure_vs_direct_sync

        def say(text: str) -> None:
            self.post_message(VsDirectProgress(text))

        try:
            report = measure_vs_direct_sync(spec, say)
        except (LoadSpecError, LoadError, OSError) as exc:
            self.post_message(VsDirectFinished(None, str(exc)))
            return
        self.post_message(VsDirectFinished(report))

    def on_vs_direct_progress(self, message: VsDirectProgress) -> None:
        """Each step (the executor opened, a round done) moves the bar and is logged."""
        self.query_one(ProgressBar).advance(1)
        self.query_one(Log).write_line(f"vs direct: {message.text}")

    def on_vs_direct_finished(self, message: VsDirectFinished) -> None:
        """The seed's tables, or why there are none."""
        self.query_one("#vs-direct", Button).disabled = False
        log = self.query_one(Log)
        if message.report is None:
            log.write_line(f"vs direct failed: {message.error}")
            self.notify(message.error or "failed", title="vs direct", severity="error")
            return
        bar = self.query_one(ProgressBar)
        if bar.total is not None:
            bar.update(progress=bar.total)
        self._show_vs_direct(message.report)
        for note in message.report.notes:
            log.write_line(f"note: {note}")
        log.write_line("vs direct done")

    def _show_vs_direct(self, report: VsDirectReport) -> None:
        """Fill both tables from the report's cells (the CLI's table, cell for cell)."""
        from triton_ge_console.sessions.loadgen import vs_direct_report as cells

        self.add_class("compared")
        for part, title, table_cells in (
                ("latency", cells.latency_title(report), cells.latency_cells(report)),
                ("throughput", cells.throughput_title(report), cells.throughput_cells(report))):
            self.query_one(f"#vs-direct-{part}-title", Label).update(Text(title, style="bold"))
            table = self.query_one(f"#vs-direct-{part}", DataTable)
            table.clear(columns=True)
            headers, rows = table_cells
            table.add_columns(*headers)
            table.add_rows([tuple(Text(cell, justify="right") for cell in row) for row in rows])

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in a field starts the run, as the Start button does."""
        event.stop()
        self.start()

    def start(self) -> None:
        """Validate the options and begin the run in the background."""
        from triton_ge_console.sessions.loadgen.inputs import LoadSpecError
        from triton_ge_console.sessions.loadgen.run import LoadRun
        from triton_ge_console.sessions.loadgen.types import LoadSpec

        if self.generate:
            self.start_streams()
            return
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

    @property
    def streaming(self) -> bool:
        """Whether a token-stream run's worker is under way."""
        return any(w.group == "streams" and w.is_running for w in self.workers)

    def start_streams(self) -> None:
        """Validate the options and stream generations in the background (`bench --generate`'s engine)."""
        from triton_ge_console.sessions.loadgen.generate_bench import timed_load

        if self.streaming:
            return
        try:
            concurrency = int(self.query_one("#concurrency", Input).value)
            seconds = int(self.query_one("#duration", Input).value)
            if concurrency < 1 or seconds < 1:
                raise ValueError("streams and seconds must each be at least 1")
            load = timed_load(self.model, self.grpc_hostport, concurrency, headers=self.headers)
        except ValueError as exc:
            self.notify(str(exc), title="load test", severity="error")
            return
        table = self.query_one("#stream-figures", DataTable)
        table.clear(columns=True)
        table.add_columns(*STREAM_COLUMNS)
        self.query_one(ProgressBar).update(total=seconds, progress=0)
        lengths = f"{load.prompt_tokens[0]} prompt + {load.output_tokens[0]} output tokens"
        self.query_one(Log).write_line(f"starting: {concurrency} streams, {seconds}s, {lengths}")
        self._stop = threading.Event()
        self._stream(load, seconds, self._stop)

    @work(thread=True, group="streams", exclusive=True, exit_on_error=False)
    def _stream(self, load: GenerateLoad, seconds: int, stop: threading.Event) -> None:
        """The library's timed run; its figures, each second and at the end, come back as messages."""
        from triton_ge_console.sessions.loadgen.generate_bench import run_timed

        def figures(so_far: GenerateRow) -> None:
            self.post_message(StreamFigures(so_far))

        row = run_timed(load, seconds, stop, figures, watch=self._watch)
        self.post_message(StreamFigures(row, final=True))

    def _watch(self, result: StreamResult) -> None:
        """A token of the watched stream arrived (its reading thread): show it, at most one message queued."""
        self.watched = result
        if not self._text_due.is_set():
            self._text_due.set()
            self.post_message(StreamText())

    def on_stream_text(self, _message: StreamText) -> None:
        """The watched stream's text (or ids) so far."""
        self._text_due.clear()
        self.query_one("#stream-text", Static).update(Text(stream_text_line(self.watched, self.model)))

    def on_stream_figures(self, message: StreamFigures) -> None:
        """A row of figures in the table, the bar moved; at the end, the first error if any."""
        row, bar = message.row, self.query_one(ProgressBar)
        if bar.total is not None:
            bar.update(progress=bar.total if message.final else min(row.duration_s, bar.total))
        table = self.query_one("#stream-figures", DataTable)
        label = "done" if message.final else "so far"
        table.add_row(*(Text(cell, justify="right") for cell in stream_cells(row, label)))
        table.scroll_end(animate=False)
        if message.final:
            log = self.query_one(Log)
            if row.first_error:
                log.write_line(f"first error: {row.first_error}")
            log.write_line(f"run done: {row.requests} generations, {row.output_tokens} tokens, "
                           f"{row.errors} errors")

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
        self._stop_runs()

    def _stop_runs(self) -> None:
        """Stop the load run or the token streams (each ends at its next generation)."""
        if self.run is not None:
            self.run.stop()
        if self._stop is not None:
            self._stop.set()

    def action_close(self) -> None:
        """Stop the run, close the dialog."""
        self._stop_runs()
        self.dismiss(None)
