"""Notebooks 02 and 03 as a Jupyter user sees them: JupyterLab 4 in Debian's Chromium, driven by Playwright.

The window is 1400 px wide with JupyterLab's file browser open, so the notebook panel is about 1000 px wide,
and is then narrowed to a 672 px panel (a 1000 px window): no control of the dashboard may reach past its
output's edge, and no text be cut inside its box. Run All
leaves the dashboard live; the user then runs `stop()` (the last cell says so), saves, and the notebook,
reopened on a fresh kernel, shows no widget error, its charts as images.

One JupyterLab for the module runs on a free loopback port with a token, in a temporary copy of the notebooks
(the repository's are never written), its settings, workspaces and runtime files in the module's folder.
Needs Chromium (`apt-get install chromium`, as .ci/run does), Playwright for Python and JupyterLab (the
`test` and `notebooks` extras); without them the tests are reported skipped, with the reason. Set
GE_SCREENSHOTS_DIR to keep a screenshot of the dashboard (docs/img/ holds the docs').

Where the time goes (measured on a shared 2-core machine): JupyterLab answers its API 10-32 s after it is
started (once for the module); the first page waits for JupyterLab's build check, so the notebook is drawn
with its kernel idle 13-28 s after the page is opened; from Run All, notebook 02's dashboard is live after
about 40 s (tritonserver and both models start inside the notebook). With one JupyterLab the module took
3 min 47 s (02: 55 s, 03: 73 s, closing: 41 s, JupyterLab's start: 18 s). Each step has its own readiness
check and bound; the module's timeout covers their sum.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.notebooks.harness import NOTEBOOKS, kernel_env, stop_leftover_sessions
from tests.notebooks.test_notebooks import no_tritonserver_under
from tests.waiting import wait_until
from triton_ge_console.session_states import READY, STARTING
from triton_ge_console.sessions.server.registry import Registry, effective_state
from triton_ge_console.widgets.models import GRID_ORDER

CHROMIUM = os.environ.get("GE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
LAB_START_S = 90.0  # JupyterLab's API answers
PAGE_S = 90.0  # the notebook drawn and its kernel idle
RUN_S = 300.0  # Run All of a whole notebook: tritonserver start, requests, load tests, reloads
LIVE_S = 120.0  # the dashboard drawn live, from the start of Run All
WINDOW = {"width": 1400, "height": 1000}  # with the file browser open: a notebook panel ~1000 px wide
PANEL_MAX_PX = 1100  # the notebook panel is no wider (the file browser takes the rest)
NARROW_PANEL_PX = 672  # and the dashboard fits a panel this wide (a 1000 px window, file browser open)
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook shown
WIDGET = ".jupyter-widgets"  # what JupyterLab draws a widget output into

playwright_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
pytest.importorskip("jupyterlab", reason="JupyterLab is not installed (the notebooks extra)")
if not Path(CHROMIUM).is_file():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, as .ci/run does)",
                allow_module_level=True)

pytestmark = [pytest.mark.timeout(900), pytest.mark.server]  # JupyterLab, kernels and tritonservers


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Lab:
    """A running JupyterLab: its URL, token, folders and process."""

    process: subprocess.Popen[str]
    url: str
    token: str
    root: Path
    workdir: Path
    started: set[int] = field(default_factory=set)  # every process seen under it

    def api(self, path: str, method: str = "GET") -> Any:
        """Call one of the server's REST endpoints with the token; its JSON answer (None when empty)."""
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            body = answer.read()
        return json.loads(body) if body else None

    def shut_down_kernels(self) -> None:
        """Shut down every kernel (as Kernel > Shut Down All Kernels does): what lives only in one is gone."""
        for kernel in self.api("/api/kernels"):
            self.api(f"/api/kernels/{kernel['id']}", method="DELETE")

    def note_processes(self) -> None:
        """Remember every process JupyterLab started so far (kernels, and what they started)."""
        with_children = [self.process.pid]
        with contextlib.suppress(psutil.NoSuchProcess):
            with_children += [p.pid for p in psutil.Process(self.process.pid).children(recursive=True)]
        self.started.update(with_children)


def lab_settings(workdir: Path) -> dict[str, str]:
    """JupyterLab's config, settings, workspaces and runtime in the test's folder; no news, no update
    check, every cell in the page."""
    folders = {"JUPYTER_CONFIG_DIR": "config", "JUPYTERLAB_SETTINGS_DIR": "settings",
               "JUPYTERLAB_WORKSPACES_DIR": "workspaces", "JUPYTER_RUNTIME_DIR": "runtime",
               "JUPYTER_DATA_DIR": "data"}
    env = {key: str(workdir / name) for key, name in folders.items()}
    notify = workdir / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notify.parent.mkdir(parents=True)
    notify.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}), encoding="utf-8")
    tracker = workdir / "settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}), encoding="utf-8")  # every cell in the page
    return env


def start_lab(workdir: Path) -> Lab:
    """JupyterLab on a copy of notebooks 02 and 03, ready to answer its API."""
    root = workdir / "notebooks"
    root.mkdir()
    for name in ("02_launch_and_watch.ipynb", "03_reload_and_tune.ipynb"):
        shutil.copy(NOTEBOOKS / name, root / name)
    for folder in ("run", "tmp", "state"):
        (workdir / folder).mkdir()
    env = {**kernel_env(workdir), **lab_settings(workdir)}
    port, token = free_port(), secrets.token_hex(16)
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={root}", "--LabApp.news_url=", "--LabApp.extension_manager=readonly"]
    if os.geteuid() == 0:  # containers and CI run as root
        command.append("--allow-root")
    log = (workdir / "lab.log").open("w", encoding="utf-8")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, text=True,
                               start_new_session=True, cwd=root)
    lab = Lab(process, f"http://127.0.0.1:{port}", token, root, workdir)

    def answers() -> bool:
        assert process.poll() is None, (workdir / "lab.log").read_text(encoding="utf-8")
        try:
            return bool(lab.api("/api/status"))
        except OSError:
            return False

    wait_until(answers, LAB_START_S, interval=0.2, what="JupyterLab answering /api/status")
    return lab


def stop_lab(lab: Lab) -> list[str]:
    """Shut JupyterLab down (its kernels with it; a kernel stops its server at exit); anything still
    running afterwards is killed and named."""
    lab.note_processes()
    if lab.process.poll() is None:
        os.killpg(lab.process.pid, signal.SIGTERM)
        try:
            lab.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(lab.process.pid, signal.SIGKILL)
            lab.process.wait(timeout=30)
    left = []
    for pid in lab.started:
        try:
            process = psutil.Process(pid)
            process.wait(timeout=30)
        except psutil.NoSuchProcess:
            continue
        except psutil.TimeoutExpired:
            left.append(" ".join(process.cmdline())[:120])
            process.kill()
    registry = Registry(lab.workdir / "state" / "sessions")
    deadline = time.monotonic() + 30  # a kernel's exit stops its session's server: give it the time
    while (serving := [r.name for r in registry.list() if effective_state(r) in (STARTING, READY)]) and (
            time.monotonic() < deadline):
        time.sleep(0.2)
    stop_leftover_sessions(lab.workdir / "state")  # and records a dead one's end
    return left + [f"session {name}" for name in serving]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """One JupyterLab for the module (each test opens its own notebook on its own kernel); nothing is left
    running after it: its kernels, and the servers they started."""
    folder = tmp_path_factory.mktemp("lab")
    running = start_lab(folder)
    try:
        yield running
    finally:
        left = stop_lab(running)
        assert not left, f"left running after JupyterLab stopped: {left}"
        assert no_tritonserver_under(folder / "state")


@dataclass
class Browser:
    """One Chromium page on the lab, with what its console reported."""

    page: Any
    errors: list[str] = field(default_factory=list)

    def tick(self) -> None:
        """Let the page handle its events for a moment (the wait between two polls)."""
        self.page.wait_for_timeout(200)


@pytest.fixture
def browser(lab: Lab) -> Iterator[Browser]:
    """Headless Chromium with one page; closed afterwards, and no browser process left behind."""
    with playwright_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = chromium.new_page(viewport=WINDOW)
            seen = Browser(page)
            page.on("console", lambda m: seen.errors.extend([m.text] if m.type == "error" else []))
            page.on("pageerror", lambda e: seen.errors.append(f"page error: {e}"))
            yield seen
        finally:
            chromium.close()
    left = [p for p in psutil.Process().children(recursive=True) if "chrom" in p.name()]
    assert not left, f"browser left running: {left}"


def open_notebook(browser: Browser, lab: Lab, name: str, fresh: bool = True) -> None:
    """Open a notebook in JupyterLab (`fresh`: as the repository holds it, not as a test saved it) and wait
    until every cell is drawn and its kernel is idle."""
    page = browser.page
    if fresh:
        shutil.copy(NOTEBOOKS / name, lab.root / name)
    cells = len(json.loads((lab.root / name).read_text(encoding="utf-8"))["cells"])
    if not page.url.startswith(f"{lab.url}/lab/tree/{name}"):  # a fresh workspace: only this notebook
        page.goto(f"{lab.url}/lab/tree/{name}?reset&token={lab.token}")
    wait_until(lambda: page.locator(f"{PANEL} .jp-Cell").count() == cells, PAGE_S,
               what=f"{name}: its {cells} cells drawn", pause=browser.tick)
    wait_until(lambda: finished(browser), PAGE_S,
               what=f"{name}: the kernel started and idle", pause=browser.tick)
    lab.note_processes()


def finished(browser: Browser) -> bool:
    """Whether the kernel shows idle in the status bar and no cell waits to run or runs ([*])."""
    page = browser.page
    idle = page.locator(".jp-StatusBar-Widget", has_text=re.compile(r"Python 3 \(ipykernel\) \| Idle"))
    running = page.locator(".jp-InputPrompt", has_text="[*]")
    return idle.count() > 0 and running.count() == 0


def menu(browser: Browser, top: str, item: str) -> None:
    """Choose a command from JupyterLab's menu bar, as a person would."""
    page = browser.page
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(top)}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()


def ticked(browser: Browser, top: str, item: str) -> bool:
    """Whether a menu's toggle shows its tick (the page has the setting), as a person would look."""
    page = browser.page
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(top)}$")).click()
    label = page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$"))
    on = page.locator(".lm-Menu-item", has=label).first.get_attribute("aria-checked") == "true"
    page.keyboard.press("Escape")
    return on


def select_last_cell(browser: Browser) -> None:
    """Click the last cell's prompt: it is selected, in command mode."""
    browser.page.locator(f"{PANEL} .jp-Cell").last.locator(".jp-InputPrompt").click()


def dashboard(browser: Browser, session: str, live: bool = False) -> Any:
    """The output that holds a session's dashboard (live, or the static copy it leaves; only live)."""
    kind = f":has({WIDGET})" if live else ""
    title = f"GE Console ─ session {session}"
    return browser.page.locator(f".jp-OutputArea-output{kind}", has_text=title).first


def numbers(board: Any) -> list[str]:
    """Every number the dashboard shows, in order."""
    return re.findall(r"\d+(?:\.\d+)?", board.inner_text())


def changing_screenshots(browser: Browser, board: Any, what: str) -> tuple[bytes, bytes]:
    """Two screenshots of the dashboard, the second once its numbers changed."""
    first, shown = board.screenshot(), numbers(board)
    wait_until(lambda: numbers(board) != shown, 30,
               what=f"{what}: the dashboard's numbers change", pause=browser.tick)
    return first, board.screenshot()


def undrawn_charts(board: Any) -> list[str]:
    """The titles of the dashboard's charts with no drawn line (an SVG path whose d has points)."""
    return board.evaluate("""node => [...node.querySelectorAll('svg.svg-figure')]
        .filter(svg => ![...svg.querySelectorAll('path.line')]
            .some(p => !p.closest('.legend') && /^M[-\\d.]+,[-\\d.]+L[-\\d.]+/.test(p.getAttribute('d') || '')
                       && !/NaN|null|undefined/.test(p.getAttribute('d'))))
        .map(svg => (svg.querySelector('.mainheading') || {}).textContent || '?')""")


def error_outputs(browser: Browser) -> list[str]:
    """Tracebacks a cell printed."""
    return browser.page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']"
                                ).all_inner_texts()


def loads_logged(lab: Lab, session: str, model: str) -> int:
    """How often the session's tritonserver logged loading a model."""
    record = Registry(lab.workdir / "state" / "sessions").load(session)
    assert record.log_path is not None
    log = record.log_path.read_text(encoding="utf-8", errors="replace")
    return log.count(f"successfully loaded '{model}'")


def row_cells(board: Any, model: str) -> tuple[Any, int]:
    """The table's cells and where a model's row starts among them."""
    cells = board.locator(".widget-gridbox").first.locator(":scope > *")
    return cells, cells.all_inner_texts().index(model)


def row_state(board: Any, model: str) -> str:
    """The STATE a model's row shows."""
    cells, first = row_cells(board, model)
    return str(cells.nth(first + GRID_ORDER.index("STATE")).inner_text())


def click_row_button(board: Any, model: str, action: str) -> None:
    """Click a model row's button in the dashboard's table, as a person would."""
    cells, first = row_cells(board, model)
    buttons = cells.nth(first + len(GRID_ORDER))  # one cell holds the row's buttons
    buttons.locator(f"button[title='{action}']").click()  # an icon, named by its tooltip


def keep_screenshot(browser: Browser, board: Any, name: str) -> None:
    """Keep a screenshot of the dashboard where GE_SCREENSHOTS_DIR says (docs/img/ holds the docs'), the
    window made tall enough to hold all of it."""
    folder = os.environ.get("GE_SCREENSHOTS_DIR")
    if folder:
        browser.page.set_viewport_size({"width": WINDOW["width"], "height": 2400})
        board.scroll_into_view_if_needed()
        browser.tick()
        board.screenshot(path=str(Path(folder) / name))
        browser.page.set_viewport_size(WINDOW)


def panel_width(browser: Browser) -> float:
    """How wide the notebook's panel is, with the file browser beside it (which must be open)."""
    page = browser.page
    assert page.locator("#filebrowser").is_visible(), "JupyterLab's file browser is not open"
    return float(page.locator(PANEL).evaluate("n => n.getBoundingClientRect().width"))


def clipped(output: Any) -> list[str]:
    """Every control or text of an output that reaches past the visible part of the output (inside its
    notebook panel and the window), or whose text is wider than its own box (cut, or spilling over the
    next); empty when all fits."""
    return list(output.evaluate("""node => {
        const panel = node.closest('.jp-NotebookPanel').getBoundingClientRect();
        const area = node.getBoundingClientRect();
        const left = Math.max(area.left, panel.left, 0);
        const right = Math.min(area.right, panel.right, document.documentElement.clientWidth);
        const found = [];
        const shown = '.widget-gridbox > *, .widget-hbox > *, .widget-vbox > *, .widget-tab-contents > *, '
            + 'button, select, input, .widget-label, .widget-html-content, .widget-readout, svg, img, table';
        for (const el of node.querySelectorAll(shown)) {
            const box = el.getBoundingClientRect();
            if (box.width === 0 || box.height === 0) continue;  // not shown (a tab not chosen)
            const what = (el.innerText || el.getAttribute('alt') || el.textContent || el.tagName)
                .trim().replace(/\\s+/g, ' ').slice(0, 50);
            if (box.left < left - 1 || box.right > right + 1) {
                const where = `${box.left.toFixed(0)}..${box.right.toFixed(0)}`;
                found.push(`${what}: ${where} past ${left.toFixed(0)}..${right.toFixed(0)}`);
            } else if (el.scrollWidth > el.clientWidth + 1
                       && el.matches('.widget-html-content, .widget-label, .widget-readout, button')) {
                const cut = ['hidden', 'clip'].includes(getComputedStyle(el).overflowX);
                const how = cut ? 'cut' : 'spills over';
                found.push(`${what}: ${how} (${el.scrollWidth} px in ${el.clientWidth} px)`);
            }
        }
        return found;
    }"""))


def fits(browser: Browser, output: Any) -> None:
    """Assert that clipped_at_both_widths() finds nothing, listing all it found."""
    found = clipped_at_both_widths(browser, output)
    assert found == [], "\n".join(found)


def clipped_at_both_widths(browser: Browser, output: Any) -> list[str]:
    """clipped() in the 1400 px window, then with the window narrowed until the notebook panel is
    NARROW_PANEL_PX wide (the width the dashboard must fit), the window restored afterwards."""
    page = browser.page
    found = clipped(output)
    narrow = WINDOW["width"] - (panel_width(browser) - NARROW_PANEL_PX)
    page.set_viewport_size({"width": int(narrow), "height": WINDOW["height"]})
    wait_until(lambda: abs(panel_width(browser) - NARROW_PANEL_PX) < 2, 10, what="a narrower notebook panel",
               pause=browser.tick)
    browser.tick()  # the widgets lay out again
    found += [f"in a {NARROW_PANEL_PX} px panel: {what}" for what in clipped(output)]
    page.set_viewport_size(WINDOW)
    wait_until(lambda: panel_width(browser) > NARROW_PANEL_PX + 2, 10,
               what="the panel wide again", pause=browser.tick)
    return found


def show_tab(output: Any, title: str) -> None:
    """Choose one of the dashboard's tabs (load test, server log), as a person would."""
    output.locator(".lm-TabBar-tab", has_text=title).first.click()


def unloaded_images(output: Any) -> list[str]:
    """The alt text of an output's images that did not load or show nothing."""
    return list(output.evaluate("""node => [...node.querySelectorAll('img')]
        .filter(img => !(img.complete && img.naturalWidth > 0 && img.getBoundingClientRect().width > 0))
        .map(img => img.getAttribute('alt') || img.getAttribute('src') || '?')"""))


def images(output: Any) -> list[str]:
    """The alt text of an output's images, in order."""
    return list(output.evaluate("node => [...node.querySelectorAll('img')].map(i => i.getAttribute('alt'))"))


def widget_errors(browser: Browser) -> list[str]:
    """What JupyterLab shows where a widget cannot be drawn ("Error displaying widget: model not found")."""
    return browser.page.locator(".jp-OutputArea-output", has_text="Error displaying widget").all_inner_texts()


def run_new_cell(browser: Browser, code: str) -> None:
    """Add a cell below the last one, type code into it and run it, as a person would."""
    select_last_cell(browser)
    page = browser.page
    page.keyboard.press("b")  # a new cell below, selected
    page.keyboard.press("Enter")  # edit it
    page.keyboard.type(code)
    page.keyboard.press("Shift+Enter")


def save_and_reopen(browser: Browser, lab: Lab, name: str, saved: str) -> None:
    """Save the notebook, shut its kernel down and open it again on a fresh one (nothing kept in a kernel)."""
    browser.page.keyboard.press("Control+s")
    wait_until(lambda: saved in (lab.root / name).read_text(encoding="utf-8"), 30,
               what=f"{name} saved with {saved!r}",
               pause=browser.tick)
    lab.shut_down_kernels()
    browser.page.reload()
    open_notebook(browser, lab, name, fresh=False)


def test_02_in_jupyterlab_the_live_dashboard_fits_acts_and_leaves_its_charts_after_stop(
        lab: Lab, browser: Browser) -> None:
    name, session = "02_launch_and_watch.ipynb", "nb02-launch-and-watch"
    open_notebook(browser, lab, name)
    assert panel_width(browser) <= PANEL_MAX_PX
    menu(browser, "Run", "Run All Cells")
    board = dashboard(browser, session, live=True)
    board.wait_for(timeout=LIVE_S * 1000)
    lab.note_processes()
    wait_until(lambda: finished(browser), RUN_S, what=f"{name}: Run All", pause=browser.tick)
    assert error_outputs(browser) == []
    assert board.locator(WIDGET).count() > 0  # Run All left it live
    board.scroll_into_view_if_needed()
    fits(browser, board)
    show_tab(board, "server log")
    fits(browser, board)
    show_tab(board, "load test")
    first, second = changing_screenshots(browser, board, name)
    assert first != second
    assert undrawn_charts(board) == []
    loads = loads_logged(lab, session, "bert_model")
    click_row_button(board, "bert_model", "reload")
    wait_until(lambda: loads_logged(lab, session, "bert_model") > loads, 60, interval=0.2,
               what="Triton loading bert_model again")
    wait_until(lambda: "✓ reload bert_model" in board.inner_text(), 60,
               what="the reload's outcome shown", pause=browser.tick)
    wait_until(lambda: row_state(board, "bert_model") == "READY", 30,
               what="bert_model READY after its reload",
               pause=browser.tick)
    keep_screenshot(browser, board, "notebook-dashboard.png")
    run_new_cell(browser, "stop()")  # what the last cell says to do
    board = dashboard(browser, session)  # the same output, no longer a widget
    wait_until(lambda: "dashboard closed at" in board.inner_text(), RUN_S,
               what="the dashboard closed", pause=browser.tick)
    wait_until(lambda: finished(browser), RUN_S, what=f"{name}: stop()", pause=browser.tick)
    assert error_outputs(browser) == []
    assert "bert_model" in board.inner_text() and board.get_attribute("data-mime-type") == "text/html"
    charts = ["NPU0 utilization history", "NPU1 utilization history", "latency of llama_model",
              "throughput of llama_model", "queue depth of llama_model"]
    assert images(board) == charts and unloaded_images(board) == []
    board.scroll_into_view_if_needed()
    fits(browser, board)
    assert browser.errors == []
    save_and_reopen(browser, lab, name, saved="dashboard closed at")
    assert widget_errors(browser) == []
    board = dashboard(browser, session)
    board.scroll_into_view_if_needed()
    assert images(board) == charts and unloaded_images(board) == []


def close_and_reopen(browser: Browser, lab: Lab, name: str, saved: str) -> None:
    """Save the notebook, close its tab (its kernel keeps running) and open it again from the file
    browser: a new page on the same kernel."""
    page = browser.page
    page.keyboard.press("Control+s")
    wait_until(lambda: saved in (lab.root / name).read_text(encoding="utf-8"), 30,
               what=f"{name} saved with {saved!r}", pause=browser.tick)
    menu(browser, "File", "Close Tab")

    def closed() -> bool:
        """Whether the tab closed; asked to save (the page changed after its save: seen under load), saved."""
        asked = page.locator(".jp-Dialog", has_text="before closing?")
        if asked.count():
            asked.get_by_role("button", name="Save", exact=True).click()
        return page.locator(PANEL).count() == 0

    wait_until(closed, 30, what=f"{name} closed", pause=browser.tick)
    assert lab.api("/api/kernels"), "closing the tab shut its kernel down"
    page.locator(".jp-DirListing-item", has_text=name).dblclick()
    cells = len(json.loads((lab.root / name).read_text(encoding="utf-8"))["cells"])
    wait_until(lambda: page.locator(f"{PANEL} .jp-Cell").count() == cells, PAGE_S,
               what=f"{name}: reopened, its {cells} cells drawn", pause=browser.tick)
    wait_until(lambda: finished(browser), PAGE_S, what=f"{name}: reopened, its kernel idle",
               pause=browser.tick)


def static_copies(browser: Browser) -> Any:
    """The outputs holding a closed dashboard's static copy."""
    return browser.page.locator(".jp-OutputArea-output", has_text="dashboard closed at")


def test_02_stop_after_the_notebook_was_closed_and_reopened_leaves_its_static_copy(
        lab: Lab, browser: Browser) -> None:
    # issue 41, 7: stop() in a reopened notebook left the dashboard cell blank, and the saved file showed
    # "Error displaying widget: model not found" with no copy of the last figures anywhere
    name, session = "02_launch_and_watch.ipynb", "nb02-launch-and-watch"
    open_notebook(browser, lab, name)
    menu(browser, "Run", "Run All Cells")
    dashboard(browser, session, live=True).wait_for(timeout=LIVE_S * 1000)
    lab.note_processes()
    wait_until(lambda: finished(browser), RUN_S, what=f"{name}: Run All", pause=browser.tick)
    close_and_reopen(browser, lab, name, saved="The dashboard stays live")
    dashboard(browser, session, live=True).wait_for(timeout=LIVE_S * 1000)  # restored from the kernel
    run_new_cell(browser, "stop()")
    wait_until(lambda: static_copies(browser).count() > 0, 120, what="the dashboard closed",
               pause=browser.tick)
    wait_until(lambda: finished(browser), RUN_S, what=f"{name}: stop()", pause=browser.tick)
    assert error_outputs(browser) == [] and widget_errors(browser) == []
    assert "dashboard closed at" in dashboard(browser, session).inner_text()  # its own cell is not blank
    charts = ["NPU0 utilization history", "NPU1 utilization history", "latency of llama_model",
              "throughput of llama_model", "queue depth of llama_model"]
    kept = static_copies(browser).and_(browser.page.locator("[data-mime-type='text/html']"))
    assert kept.count() == 1 and images(kept.first) == charts
    keep_screenshot(browser, dashboard(browser, session), "reopened-stop.png")
    # The kernel cannot change the dashboard's own cell in this page (a display update reaches only the page
    # that made the display, and this page's copy of the cell came from the file); the one place JupyterLab
    # keeps a widget's content without a kernel is the notebook's widget state, saved only with Settings >
    # Save Widget State Automatically (off by default), as notebooks/README.md says
    try:
        menu(browser, "Settings", "Save Widget State Automatically")
        wait_until(lambda: ticked(browser, "Settings", "Save Widget State Automatically"), 30,
                   what="Save Widget State Automatically ticked", pause=browser.tick)
        # on a fresh kernel: nothing in one
        save_and_reopen(browser, lab, name, saved="application/vnd.jupyter.widget-state+json")
    finally:
        widget_state_setting(lab).unlink(missing_ok=True)  # the module's other notebooks save without it
    wait_until(lambda: static_copies(browser).count() == 2, PAGE_S, what="both copies drawn, no kernel",
               pause=browser.tick)
    assert widget_errors(browser) == []
    own, under_stop = static_copies(browser).all()  # the dashboard's cell (its widget state), stop()'s
    for kept in (own, under_stop):
        kept.scroll_into_view_if_needed()
        assert images(kept) == charts and unloaded_images(kept) == []
    assert own.locator(WIDGET).count() > 0 and under_stop.get_attribute("data-mime-type") == "text/html"


def widget_state_setting(lab: Lab) -> Path:
    """Where JupyterLab keeps a user's Save Widget State Automatically (jupyterlab-manager's saveState)."""
    return lab.workdir / "settings" / "@jupyter-widgets" / "jupyterlab-manager" / "plugin.jupyterlab-settings"


def test_03_in_jupyterlab_run_all_leaves_the_dashboard_live_and_its_bar_charts_reopen_as_images(
        lab: Lab, browser: Browser) -> None:
    name, session = "03_reload_and_tune.ipynb", "nb03-reload-and-tune"
    open_notebook(browser, lab, name)
    assert panel_width(browser) <= PANEL_MAX_PX
    menu(browser, "Run", "Run All Cells")
    board = dashboard(browser, session, live=True)
    board.wait_for(timeout=LIVE_S * 1000)
    lab.note_processes()
    first, second = changing_screenshots(browser, board, name)
    assert first != second
    wait_until(lambda: finished(browser), RUN_S, what=f"{name}: Run All", pause=browser.tick)
    assert error_outputs(browser) == []
    assert board.locator(WIDGET).count() > 0
    board.scroll_into_view_if_needed()
    fits(browser, board)
    bars = ["throughput (req/s), 8 clients", "client latency (ms)"]
    shown = bar_charts(browser)
    shown.scroll_into_view_if_needed()
    assert images(shown) == bars and unloaded_images(shown) == []
    fits(browser, shown)
    run_new_cell(browser, "stop()")
    board = dashboard(browser, session)
    wait_until(lambda: "dashboard closed at" in board.inner_text(), RUN_S,
               what="the dashboard closed", pause=browser.tick)
    wait_until(lambda: finished(browser), RUN_S, what=f"{name}: stop()", pause=browser.tick)
    assert error_outputs(browser) == [] and unloaded_images(board) == [] and len(images(board)) == 5
    assert browser.errors == []
    save_and_reopen(browser, lab, name, saved="dashboard closed at")
    assert widget_errors(browser) == []
    shown = bar_charts(browser)
    shown.scroll_into_view_if_needed()
    assert images(shown) == bars and unloaded_images(shown) == []
    board = dashboard(browser, session)
    board.scroll_into_view_if_needed()
    assert len(images(board)) == 5 and unloaded_images(board) == []


def bar_charts(browser: Browser) -> Any:
    """The output of notebook 03's before/after comparison."""
    return browser.page.locator(".jp-OutputArea-output:has(img[alt='client latency (ms)'])").first


def test_closing_jupyterlab_with_a_live_dashboard_leaves_no_server(lab: Lab, browser: Browser) -> None:
    # notebook 02 says it: the server is also stopped if the kernel exits first. Last in the module: it
    # stops the module's JupyterLab (the fixture then finds nothing left to stop)
    open_notebook(browser, lab, "02_launch_and_watch.ipynb")
    menu(browser, "Run", "Run All Cells")
    dashboard(browser, "nb02-launch-and-watch", live=True).wait_for(timeout=LIVE_S * 1000)
    wait_until(lambda: finished(browser), RUN_S, what="Run All", pause=browser.tick)
    lab.note_processes()
    assert not no_tritonserver_under(lab.workdir / "state")  # serving, until JupyterLab stops
    assert stop_lab(lab) == []
    assert no_tritonserver_under(lab.workdir / "state")
