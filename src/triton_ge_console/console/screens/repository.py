"""The repository: models tree, highlighted config.pbtxt, validation inline, disk-vs-loaded diff, editing."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, cast

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static, TextArea, Tree

from triton_ge_console.console.format import short_path
from triton_ge_console.console.highlight import highlight_pbtxt
from triton_ge_console.console.host import ConsoleHost
from triton_ge_console.files import write_atomic
from triton_ge_console.repository import inventory
from triton_ge_console.repository.inventory import ConfigFinding
from triton_ge_console.sessions.observe.source import session_headers
from triton_ge_console.sessions.observe.stats import fetch_loaded_config


def findings_text(findings: list[ConfigFinding]) -> Text:
    """Validation results, one per line, errors first."""
    if not findings:
        return Text("✓ valid", style="bold green")
    text = Text()
    for finding in sorted(findings, key=lambda f: (f.severity != "error", f.line or 0)):
        style = "bold red" if finding.severity == "error" else "yellow"
        where = f"line {finding.line}" if finding.line else "config"
        field = f" {finding.field}:" if finding.field else ""
        text.append(f"{finding.severity} {where}{field} {finding.message}\n", style=style)
    return text


def diff_text(lines: list[str]) -> Text:
    """A unified diff coloured like git's."""
    text = Text()
    for line in lines:
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else (
            "cyan" if line.startswith("@@") else "")
        text.append(line + "\n", style=style)
    return text


class RepositoryScreen(Screen[None]):
    """Browse, check and edit the session's model repository."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "back"),
        Binding("e", "edit", "edit"),
        Binding("ctrl+s", "save", "save+validate+reload", priority=True),
        Binding("D", "refresh_diff", "diff"),
    ]

    def __init__(self, repository: Path) -> None:
        super().__init__()
        self.repository = repository
        self.current: inventory.RepoModel | None = None

    @property
    def console(self) -> ConsoleHost:
        """The app, as far as this screen needs it."""
        return cast(ConsoleHost, self.app)

    def compose(self) -> ComposeResult:
        """Tree on the left; config, validation and diff on the right."""
        yield Static(Text(f" Repository {short_path(self.repository)}", style="bold"), id="repo-title")
        with Horizontal(id="repo-main"):
            yield Tree(self.repository.name or str(self.repository), id="repo-tree")
            with Vertical(id="repo-right"):
                with VerticalScroll(id="config-scroll"):
                    yield Static(id="config-view")
                yield TextArea(id="config-edit", show_line_numbers=True, soft_wrap=False)
                yield Static(id="validation")
                yield Static(id="repo-progress")
                with VerticalScroll(id="diff-scroll"):
                    yield Static(id="diff-view")
        yield Footer()

    def on_mount(self) -> None:
        """Fill the tree and show the selected (or first) model."""
        self.query_one("#config-edit", TextArea).display = False
        self.query_one("#config-scroll").border_title = "config.pbtxt"
        self.query_one("#diff-scroll").border_title = "diff: loaded by Triton → on disk"
        self.set_interval(0.5, self._show_running)
        tree = self.query_one(Tree)
        tree.root.expand()
        models = inventory.list_models(self.repository)
        for model in models:
            node = tree.root.add(model.name, data=model, expand=True)
            for version in model.versions:
                node.add_leaf(f"version {version}", data=model)
        if not models:
            self.query_one("#config-view", Static).update(Text("no model folders with a config.pbtxt here"))
            return
        wanted = next((m for m in models if m.name == self.console.selected_model), models[0])
        self.show_model(wanted)
        tree.focus()

    def _show_running(self) -> None:
        """The reloads under way for more than a second, and for how long (Triton gives no progress)."""
        line = self.console.running_line()
        progress = self.query_one("#repo-progress", Static)
        progress.display = bool(line)
        progress.update(line)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[inventory.RepoModel]) -> None:
        """Follow the tree cursor."""
        model = event.node.data
        if model is not None and model != self.current:
            self.show_model(model)

    def show_model(self, model: inventory.RepoModel) -> None:
        """Show one model's config, validation results and diff."""
        self.current = model
        self.console.selected_model = model.name
        try:
            text = model.config_path.read_text(encoding="utf-8")
        except OSError as exc:
            self.query_one("#config-view", Static).update(Text(str(exc), style="red"))
            return
        self._show_text(text)
        self.action_refresh_diff()

    def _show_text(self, text: str) -> None:
        """Highlight and validate the given config text."""
        assert self.current is not None
        findings = inventory.check_config_text(text, self.current.config_path)
        error_lines = [f.line for f in findings if f.line and f.severity == "error"]
        self.query_one("#config-scroll").border_title = short_path(self.current.config_path)
        self.query_one("#config-view", Static).update(highlight_pbtxt(text, error_lines))
        self.query_one("#validation", Static).update(findings_text(findings))

    def action_refresh_diff(self) -> None:
        """Fetch the loaded config (a blocking HTTP call) and diff it against the file."""
        if self.current is None:
            return
        snapshot = self.console.connection.last_good
        url = snapshot.endpoints.http_url if snapshot else None
        self._diff_worker(url, self.current, session_headers(self.console.source))

    @work(thread=True, exclusive=True, group="diff", exit_on_error=False)
    def _diff_worker(self, url: str | None, model: inventory.RepoModel, headers: dict[str, str]) -> None:
        """GET the loaded config (with the session's token), then draw the diff on the UI thread."""
        loaded: dict[str, Any] | None = fetch_loaded_config(url, model.name, headers=headers)
        try:
            lines = inventory.config_diff(model.config_path.read_text(encoding="utf-8"), loaded)
        except OSError as exc:
            lines = [f"(cannot read {model.config_path}: {exc})"]
        self.app.call_from_thread(self._show_diff, lines)

    def _show_diff(self, lines: list[str]) -> None:
        """Draw a diff."""
        self.query_one("#diff-view", Static).update(diff_text(lines))

    def action_edit(self) -> None:
        """Edit the config in place."""
        if self.current is None:
            return
        editor = self.query_one("#config-edit", TextArea)
        try:
            editor.load_text(self.current.config_path.read_text(encoding="utf-8"))
        except OSError as exc:
            self.notify(str(exc), title="cannot edit", severity="error")
            return
        editor.display = True
        self.query_one("#config-scroll").display = False
        editor.focus()

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        """Validate as the operator types."""
        if self.current is not None and event.text_area.display:
            findings = inventory.check_config_text(event.text_area.text, self.current.config_path)
            self.query_one("#validation", Static).update(findings_text(findings))

    def action_save(self) -> None:
        """Validate; unless the edit brings new errors, write atomically and reload the model."""
        editor = self.query_one("#config-edit", TextArea)
        if self.current is None or not editor.display:
            return
        text = editor.text
        path = self.current.config_path
        findings = inventory.check_config_text(text, path)
        try:
            on_disk = inventory.check_config_text(path.read_text(encoding="utf-8"), path)
        except OSError:
            on_disk = []
        known = {(f.field, f.message) for f in on_disk}
        new_errors = [f for f in findings if f.severity == "error" and (f.field, f.message) not in known]
        if new_errors:
            self.query_one("#validation", Static).update(findings_text(findings))
            self.notify(f"not saved: {len(new_errors)} new error(s), first: {new_errors[0].message}",
                        severity="error")
            return
        try:
            write_atomic(path, text)
        except OSError as exc:
            self.notify(f"not saved: {exc}", title="save failed", severity="error")
            return
        self._close_editor()
        self._show_text(text)
        self.console.run_command("reload", self.current.name)

    def _close_editor(self) -> None:
        """Back to the highlighted view."""
        self.query_one("#config-edit", TextArea).display = False
        self.query_one("#config-scroll").display = True
        self.query_one(Tree).focus()

    def action_back(self) -> None:
        """Leave the editor (discarding edits), or the screen."""
        if self.query_one("#config-edit", TextArea).display:
            self._close_editor()
            if self.current is not None:
                self.show_model(self.current)
            self.notify("edit discarded", timeout=2)
        else:
            self.app.pop_screen()
