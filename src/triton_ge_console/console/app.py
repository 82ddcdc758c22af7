"""The console app: follows its session with the one poll loop in a thread worker, holds the connection
state, dispatches actions."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from triton_ge_console.console import actions, lifeline, long_lived
from triton_ge_console.console.action_handlers import ActionHandlers
from triton_ge_console.console.connection import Connection
from triton_ge_console.console.messages import CommandFinished, SnapshotArrived
from triton_ge_console.console.options import ConsoleOptions, ServerLifecycle
from triton_ge_console.console.palette import ActionCommands
from triton_ge_console.console.screens.confirm import ConfirmScreen
from triton_ge_console.console.screens.dashboard import DashboardScreen
from triton_ge_console.console.screens.help import HelpScreen
from triton_ge_console.console.screens.launching import LaunchingScreen
from triton_ge_console.console.screens.logs import LogsScreen
from triton_ge_console.console.screens.repository import RepositoryScreen
from triton_ge_console.display import printable, printable_lines
from triton_ge_console.repository import inventory
from triton_ge_console.sessions.observe.follow import Follower
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot
from triton_ge_console.sessions.observe.source import SessionSource, commands_disabled
from triton_ge_console.sessions.server.server_log import LogTail


class GEConsoleApp(ActionHandlers):
    """Live dashboard and one-key model control for one session."""

    CSS_PATH = "console.tcss"
    TITLE = "GE Console"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit", "quit"), *actions.bindings()]
    COMMANDS: ClassVar = App.COMMANDS | {ActionCommands}
    ENABLE_COMMAND_PALETTE = True

    def __init__(self, source: SessionSource, options: ConsoleOptions | None = None) -> None:
        super().__init__()
        self.source = source
        self.options = options or ConsoleOptions()
        self.polls_done = 0
        self.last_note: str | None = None  # the last poll's note (a MindIE with its monitoring off)
        self.poll_stop = threading.Event()
        self.lifeline: lifeline.Lifeline | None = None
        self.set_reactive(ActionHandlers.connection, Connection(source.name, self.options.interval_s))
        self.init_handler_state()
        self.config_summaries = inventory.ConfigSummaries(self.repository_path)

    def get_default_screen(self) -> Screen[None]:
        """The dashboard is the home screen."""
        return DashboardScreen()

    def on_unmount(self) -> None:
        """Stop polling and release the watch thread (asyncio waits for executor threads before the process
        can exit)."""
        self.poll_stop.set()
        if self.watch_stop is not None:
            self.watch_stop.set()
        self.stop_openai()
        if self.lifeline is not None:
            self.lifeline.release()
        long_lived.hand_back_start_up_objects()

    def on_mount(self) -> None:
        """Leave start-up objects out of full collections; poll (once the server is up, if it starts one)."""
        long_lived.leave_out_start_up_objects()
        self.lifeline = lifeline.hold_for(self)
        startup = self.options.startup
        if startup is None:
            self.follow()
            return
        self.push_screen(LaunchingScreen(startup, f"Starting session {self.source.name} …"), self._launched)

    def _launched(self, ok: bool | None) -> None:
        """The server is up: begin polling."""
        if ok:
            self.follow()

    def follow(self) -> None:
        """Poll the session until the app ends: the one loop, backing off (doubling) while it is down."""
        options = self.options
        loop = Follower([self.source], interval_s=options.interval_s, backoff_s=options.max_backoff_s,
                        doubling=True, max_workers=1, max_polls=options.max_polls)
        self._poll_worker(loop, self.poll_stop)

    @work(thread=True, exclusive=True, group="poll", exit_on_error=False)
    def _poll_worker(self, loop: Follower, stop: threading.Event) -> None:
        """The loop off the UI thread; each snapshot comes back as a message."""
        loop.run(lambda _name, snapshot: self.post_message(SnapshotArrived(snapshot)), stop)

    def on_snapshot_arrived(self, message: SnapshotArrived) -> None:
        """Fold the snapshot into the connection state."""
        self.polls_done += 1
        note = message.snapshot.note
        if note and note != self.last_note:  # what the server does not give: said once, plainly
            self.notify(note, title="no figures from this server", severity="warning", timeout=30)
        self.last_note = note
        was_stale = self.connection.stale
        self.connection = next_connection(self.connection, message.snapshot, self.options)
        if self.connection.stale and not was_stale and self.options.server is not None:
            self._diagnose_worker(self.options.server)

    @work(thread=True, exclusive=True, group="diagnose", exit_on_error=False)
    def _diagnose_worker(self, server: ServerLifecycle) -> None:
        """Ask the lifecycle what happened (exit code, log cause) and show it in the banner."""
        diagnosis = server.diagnose()
        if diagnosis:
            self.call_from_thread(self._set_diagnosis, diagnosis)

    def _set_diagnosis(self, diagnosis: str) -> None:
        """Show why the server went away, while it still is away."""
        if self.connection.stale:
            self.connection = dataclasses.replace(self.connection, diagnosis=diagnosis)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Worker errors become notifications; a poll loop that broke is followed again after the backoff."""
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        self.notify(printable_lines(f"{type(error).__name__}: {error}"), title=f"{event.worker.name} failed",
                    severity="error")
        if event.worker.group == "poll":
            self.connection = dataclasses.replace(self.connection, error=str(error),
                                                  failed_polls=self.connection.failed_polls + 1,
                                                  retry_in_s=self.options.max_backoff_s)
            self.set_timer(self.options.max_backoff_s, self.follow)

    def action_run(self, action_id: str) -> None:
        """Run a registered action, asking first when it is destructive."""
        action = actions.find(action_id)
        handler = self._notifying_on_error(action.id, getattr(self, f"action_{action.id}"))
        refused = action.group == "model" and commands_disabled(self.source.controller)
        if not action.destructive or refused:  # nothing to confirm: the command only says why it is off
            handler()
            return
        target = self.selected_model if action.group == "model" else f"session {self.source.name}"

        def confirmed(answer: bool | None) -> None:
            if answer:
                handler()

        self.push_screen(ConfirmScreen(f"{action.description}?", str(target)), confirmed)

    def _notifying_on_error(self, action_id: str, handler: Callable[[], object]) -> Callable[[], None]:
        """The handler, with any error it raises turned into a notification (the UI never crashes)."""

        def run() -> None:
            try:
                handler()
            except Exception as exc:
                self.notify(printable_lines(f"{type(exc).__name__}: {exc}"), title=f"{action_id} failed",
                            severity="error")

        return run

    def on_command_finished(self, message: CommandFinished) -> None:
        """Tell the operator what a command did, with Triton's own message on failure."""
        result = message.result
        title = printable(f"{result.action} {result.target}")
        timing = "" if result.duration_s is None else f" ({result.duration_s:.1f}s)"
        self.notify(printable_lines(result.message) + timing, title=title,
                    severity="information" if result.ok else "error", timeout=4 if result.ok else 10)
        self.record_result(result)

    def _dashboard(self) -> DashboardScreen | None:
        """The dashboard, brought to the front."""
        while len(self.screen_stack) > 1 and not isinstance(self.screen, DashboardScreen):
            self.pop_screen()
        return self.screen if isinstance(self.screen, DashboardScreen) else None

    def action_filter_models(self) -> None:
        """Open the dashboard's filter box."""
        if (dashboard := self._dashboard()) is not None:
            dashboard.open_filter()

    def action_sort_models(self) -> None:
        """Sort the models table by the next column."""
        if (dashboard := self._dashboard()) is not None:
            dashboard.sort_models()

    def action_show_help(self) -> None:
        """Every action with its key."""
        self.push_screen(HelpScreen())

    def action_show_logs(self) -> None:
        """The server log screen."""
        if not isinstance(self.screen, LogsScreen):
            self.push_screen(LogsScreen(LogTail(self.source.log_path)))

    def action_show_repository(self) -> None:
        """The repository screen."""
        repository = self.repository_path()
        if repository is None:
            self.notify("no repository known for this session", severity="warning")
        elif not isinstance(self.screen, RepositoryScreen):
            self.push_screen(RepositoryScreen(repository))

    def action_quit(self) -> None:  # type: ignore[override]
        """Quit; the demo's cleanup (stop load and server) runs after the app exits."""
        self.exit()


def next_connection(previous: Connection, snapshot: ServerSnapshot, options: ConsoleOptions) -> Connection:
    """A good snapshot resets failures; a failed one keeps the last good figures and backs off."""
    if snapshot.error is None:
        return dataclasses.replace(previous, last_good=snapshot, error=None, failed_polls=0, retry_in_s=None,
                                   stopped=False, diagnosis=None, no_reply=False)
    failed = previous.failed_polls + 1
    backoff = min(options.interval_s * (2 ** (failed - 1)), options.max_backoff_s)
    return dataclasses.replace(previous, error=snapshot.error, failed_polls=failed, retry_in_s=backoff,
                               no_reply=snapshot.no_reply)


def create_app(
    source: SessionSource,
    *,
    interval_s: float = 1.0,
    repository: Path | None = None,
    thresholds: Mapping[str, Mapping[str, float]] | None = None,
    server: ServerLifecycle | None = None,
    max_polls: int | None = None,
    options: ConsoleOptions | None = None,
) -> GEConsoleApp:
    """The console for one session source (live or recorded)."""
    chosen = options or ConsoleOptions(interval_s=interval_s, repository=repository,
                                       thresholds=dict(thresholds or {}), server=server, max_polls=max_polls)
    return GEConsoleApp(source, chosen)
