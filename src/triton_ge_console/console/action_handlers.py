"""The handlers behind the action registry: model commands, repository watch, server control, diagnostics."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.reactive import reactive

from triton_ge_console.console.connection import Connection
from triton_ge_console.console.messages import CommandFinished, RepositoryChanged
from triton_ge_console.console.options import ConsoleOptions
from triton_ge_console.console.toasts import PlainToasts
from triton_ge_console.repository import inventory
from triton_ge_console.repository.progress import SHOW_AFTER_S, elapsed_line
from triton_ge_console.sessions.observe.source import (
    CommandResult,
    SessionSource,
    commands_disabled,
    session_headers,
)
from triton_ge_console.sessions.server.debug_env import diagnostic_env
from triton_ge_console.triton_terms import host_port

if TYPE_CHECKING:
    from triton_ge_console.sessions.frontdoor.serve import RunningDoor
    from triton_ge_console.sessions.loadgen.vs_direct import VsDirectSpec


class ActionHandlers(PlainToasts[None]):
    """The app's base: state and the handlers behind most `action_<id>` of the registry."""

    # repaint=False: the app itself draws nothing; screens watch these and redraw only what changed
    connection: reactive[Connection] = reactive(Connection("", 1.0), init=False, repaint=False)
    selected_model: reactive[str | None] = reactive(None, repaint=False)
    source: SessionSource
    options: ConsoleOptions

    def init_handler_state(self) -> None:
        """State the handlers keep: last errors per model, commands under way, watch, diagnostics."""
        self.last_errors: dict[str, str] = {}
        self.running: dict[str, float] = {}  # "reloading m" → when it started (screens show the long ones)
        self.diagnostics: set[str] = set()
        self.watch_stop: threading.Event | None = None
        self.openai_door: RunningDoor | None = None  # `ge-console openai`'s front door, started here

    def repository_path(self) -> Path | None:
        """The session's repository: given up front, or known once the console launched the server."""
        if self.options.repository is not None:
            return self.options.repository
        locate = self.options.locate_repository
        return locate() if locate is not None else None

    def record_result(self, result: CommandResult) -> None:
        """Remember a model's last failure (what changed since a load is the session's to track)."""
        if not result.ok:
            self.last_errors[result.target] = result.message
            return
        self.last_errors.pop(result.target, None)

    def mark_stopped(self, stopped: bool) -> None:
        """The operator stopped the server on purpose: say so rather than "not answering"."""
        self.connection = dataclasses.replace(self.connection, stopped=stopped)

    def _selected(self) -> str | None:
        """The selected model, or a warning when there is none."""
        if self.selected_model is None:
            self.notify("select a model first", severity="warning")
        return self.selected_model

    def action_reload_model(self) -> None:
        """Reload the selected model."""
        if (model := self._selected()) is not None:
            self.run_command("reload", model)

    def action_load_model(self) -> None:
        """Load the selected model."""
        if (model := self._selected()) is not None:
            self.run_command("load", model)

    def action_unload_model(self) -> None:
        """Unload the selected model (after confirmation)."""
        if (model := self._selected()) is not None:
            self.run_command("unload", model)

    def run_command(self, verb: str, model: str) -> None:
        """Send one controller command in a worker, showing that it is under way; a server whose engine
        takes no model commands (vLLM, MindIE) says why instead."""
        disabled = commands_disabled(self.source.controller)
        if disabled:
            self.notify(f"{verb} {model}: {disabled}", title=f"{verb} disabled", severity="warning")
            return
        self.notify(f"{verb} {model}…", timeout=2)
        self._command_worker(verb, model)

    @work(thread=True, group="control", exit_on_error=False)
    def _command_worker(self, verb: str, model: str) -> None:
        """The blocking controller call."""
        command: Callable[[str], CommandResult] = getattr(self.source.controller, verb)
        what = f"{verb}ing {model}"
        self.running[what] = time.monotonic()
        try:
            result = command(model)
        finally:
            self.running.pop(what, None)
        self.post_message(CommandFinished(result))

    def running_line(self, show_after_s: float = SHOW_AFTER_S) -> str:
        """The commands under way for longer than show_after_s, with how long Triton has taken so far
        (it says nothing while it loads): "reloading m … 12 s"; "" when none."""
        now = time.monotonic()
        return "; ".join(elapsed_line(what, now - since) for what, since in list(self.running.items())
                         if now - since >= show_after_s)

    def action_reload_changed(self) -> None:
        """Reload every model whose folder changed since Triton loaded it (the session's digests)."""
        if self.options.reload_changed is None:
            self.notify("reload-changed needs a session launched here (it tracks what Triton loaded); "
                        "reload a model with r", severity="warning")
            return
        self._reload_changed_worker(self.options.reload_changed)

    @work(thread=True, group="control", exit_on_error=False)
    def _reload_changed_worker(self, reload_changed: Callable[[], list[CommandResult]]) -> None:
        """The session's own reload-changed (digests of what Triton loaded), reported per model."""
        self.running["reloading what changed"] = time.monotonic()
        try:
            results = reload_changed()
        finally:
            self.running.pop("reloading what changed", None)
        if not results:
            self.call_from_thread(self.notify, "no model changed on disk since it was loaded")
        for result in results:
            self.post_message(CommandFinished(result))

    def action_toggle_watch(self) -> None:
        """Start or stop watching the repository; changes reload the models they touch."""
        repository = self.repository_path()
        if repository is None:
            self.notify("no repository known for this session", severity="warning")
        elif self.watch_stop is None:
            self.watch_stop = threading.Event()
            self._watch_worker(repository, self.watch_stop)
            self.notify(f"watching {repository}: changes reload their model", title="watch on")
        else:
            self.watch_stop.set()
            self.watch_stop = None
            self.notify("stopped watching the repository", title="watch off")

    @work(thread=True, group="watch", exit_on_error=False)
    def _watch_worker(self, repository: Path, stop: threading.Event) -> None:
        """Block on file changes (watchfiles) until stopped, posting the models touched."""
        import watchfiles

        for changes in watchfiles.watch(repository, stop_event=stop, debounce=400, rust_timeout=500):
            models = {inventory.model_of_path(repository, Path(path)) for _change, path in changes}
            named = tuple(sorted(m for m in models if m))
            if named:
                self.post_message(RepositoryChanged(named))

    def on_repository_changed(self, message: RepositoryChanged) -> None:
        """Reload what the watcher saw change: through the session's digests when it has them."""
        if self.options.reload_changed is not None:
            self._reload_changed_worker(self.options.reload_changed)
            return
        for model in message.models:
            self.run_command("reload", model)

    def action_toggle_openai(self) -> None:
        """Start the OpenAI-compatible front door over the session's generate models, or stop it."""
        if self.openai_door is None:
            self.notify("starting the OpenAI-compatible API…", timeout=2)
            self._openai_worker(self.source.name)
            return
        self.stop_openai()
        self.notify("the OpenAI-compatible API stopped", title="openai off")

    @work(thread=True, group="openai", exit_on_error=False)
    def _openai_worker(self, session: str) -> None:
        """Start it as `ge-console openai` does (a free loopback port), then say where it listens."""
        from triton_ge_console.sessions.frontdoor.serve import start_openai
        from triton_ge_console.sessions.server.registry import Registry

        try:
            door = start_openai(Registry().load(session))
        except (ValueError, LookupError, OSError) as exc:
            self.call_from_thread(self.notify, str(exc), title="openai", severity="error")
            return
        self.openai_door = door
        locked = " (Authorization: Bearer <the session's token>)" if door.plan.token else ""
        self.call_from_thread(self.notify, f"OpenAI API at {door.url}{locked}", title="openai on",
                              timeout=30)

    def stop_openai(self) -> None:
        """Stop the front door this console started, if any."""
        door, self.openai_door = self.openai_door, None
        if door is not None:
            door.stop()

    def action_test_request(self) -> None:
        """Send one request with generated inputs to the selected model."""
        model = self._selected()
        snapshot = self.connection.last_good
        url = snapshot.endpoints.http_url if snapshot else None
        if model is None:
            return
        if url is None:
            self.notify("the server's HTTP endpoint is not known", severity="warning")
            return
        self.notify(f"sending a test request to {model}…", timeout=2)
        self._probe_worker(url, model, session_headers(self.source))

    @work(thread=True, group="probe", exit_on_error=False)
    def _probe_worker(self, url: str, model: str, headers: dict[str, str]) -> None:
        """The blocking request, with the session's token."""
        from triton_ge_console.sessions.act.probe import send_test_request  # numpy, clients: not at start

        result = send_test_request(url, model, headers=headers)
        self.post_message(CommandFinished(CommandResult("test request", model, result.ok, result.message,
                                                        None if result.latency_ms is None else
                                                        result.latency_ms / 1000.0)))

    def action_load_test(self) -> None:
        """Open the load test dialog for the selected model."""
        self._open_load_test(compare=False)

    def action_vs_direct(self) -> None:
        """Open the load test dialog and measure what Triton costs the selected model (bench --vs-direct)."""
        self._open_load_test(compare=True)

    def _open_load_test(self, compare: bool) -> None:
        """The load test dialog for the selected model; with compare, the vs-direct comparison starts."""
        from triton_ge_console.console.screens.loadtest import LoadTestScreen
        from triton_ge_console.sessions.server.registry import grpc_token_header

        model = self._selected()
        snapshot = self.connection.last_good
        grpc = snapshot.endpoints.grpc_url if snapshot else None
        if model is None:
            return
        if grpc is None:
            self.notify("the server's gRPC endpoint is not known", severity="warning")
            return
        headers = {grpc_token_header(k): v for k, v in session_headers(self.source).items()}
        shown = snapshot.model(model) if snapshot is not None else None
        generate = (shown is not None and shown.generation is not None) or self._decoupled(model)
        screen = LoadTestScreen(model, host_port(grpc), headers, self._vs_direct_spec(model),
                                generate)
        self.push_screen(screen)
        if compare:
            screen.call_after_refresh(screen.start_vs_direct)

    def _decoupled(self, model: str) -> bool:
        """Whether the model's config.pbtxt streams its responses (a generate model before its figures)."""
        repository = self.repository_path()
        return repository is not None and inventory.decoupled(repository / model / "config.pbtxt")

    def _vs_direct_spec(self, model: str) -> VsDirectSpec | None:
        """bench --vs-direct's comparison over the session's protocols; None without the model's files."""
        from triton_ge_console.sessions.loadgen.vs_direct import VsDirectSpec
        from triton_ge_console.sessions.server.registry import grpc_token_header

        snapshot, repository = self.connection.last_good, self.repository_path()
        if snapshot is None or repository is None:
            return None
        token = session_headers(self.source)
        endpoints, headers = {}, {}
        for protocol, url, keyed in (("grpc", snapshot.endpoints.grpc_url, grpc_token_header),
                                     ("http", snapshot.endpoints.http_url, str)):
            if url is not None:
                endpoints[protocol] = host_port(url)
                headers[protocol] = {keyed(k): v for k, v in token.items()}
        return VsDirectSpec(model=model, endpoints=endpoints, repository=repository, headers=headers)

    def action_start_server(self) -> None:
        """Start the session's server with the diagnostics chosen."""
        self._server_worker("start")

    def action_stop_server(self) -> None:
        """Stop the session's server (after confirmation)."""
        self._server_worker("stop")

    def action_restart_server(self) -> None:
        """Stop then start the server, applying the diagnostics chosen (after confirmation)."""
        self._server_worker("restart")

    @work(thread=True, group="server", exclusive=True, exit_on_error=False)
    def _server_worker(self, verb: str) -> None:
        """Blocking server lifecycle calls, with progress as notifications."""
        server = self.options.server
        if server is None:
            message = "this console did not start the server, so it cannot control it"
            self.post_message(CommandFinished(CommandResult(verb, self.source.name, False, message)))
            return
        started = time.monotonic()
        self.call_from_thread(self.notify, f"{verb} server…", timeout=3)
        env = diagnostic_env(self.diagnostics, self._diagnostics_dir())
        result = None
        if verb in ("stop", "restart"):
            result = server.stop()
            self.call_from_thread(self.mark_stopped, verb == "stop" and result.ok)
        if verb in ("start", "restart") and (result is None or result.ok):
            result = server.start(env)
        assert result is not None
        elapsed = time.monotonic() - started
        self.post_message(CommandFinished(CommandResult(verb, self.source.name, result.ok, result.message,
                                                        elapsed)))

    def _diagnostics_dir(self) -> Path:
        """Where graph dumps and profiles go."""
        return self.options.diagnostics_dir or Path.cwd() / "ge-diagnostics"

    def _toggle_diagnostic(self, name: str) -> None:
        """Flip one diagnostic for the next restart and say what it sets."""
        if name in self.diagnostics:
            self.diagnostics.discard(name)
            self.notify(f"{name} off for the next restart", title="diagnostics")
            return
        self.diagnostics.add(name)
        env = diagnostic_env({name}, self._diagnostics_dir())
        settings = " ".join(f"{k}={v}" for k, v in env.items())
        self.notify(f"{name} on for the next restart: {settings}", title="diagnostics")

    def action_toggle_plog(self) -> None:
        """npu_ge plog to stdout at debug level."""
        self._toggle_diagnostic("plog")

    def action_toggle_dump_graph(self) -> None:
        """GE graph dumps."""
        self._toggle_diagnostic("dump_graph")

    def action_toggle_profiling(self) -> None:
        """CANN profiling."""
        self._toggle_diagnostic("profiling")
