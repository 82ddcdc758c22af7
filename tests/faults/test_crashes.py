"""A tritonserver that crashes: Triton 2.51 segfaults on certain HTTP JSON inference bodies (a shape of
2**62 elements, checked here; gRPC refuses the same). Its orphaned stubs are ended at once, and with
`up --restart on-crash` the server is started again and serves (real tritonserver)."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest
from rich.text import Text

from tests.faults.test_reconfigured_health import serves as answers
from tests.models import write_echo_model
from tests.waiting import wait_until
from triton_ge_console.cli import main
from triton_ge_console.console.connection import Connection
from triton_ge_console.console.widgets.header import header_facts, header_line
from triton_ge_console.sessions.live import LiveSource
from triton_ge_console.sessions.observe.health import stub_instances
from triton_ge_console.sessions.server.registry import Registry, SessionRecord
from triton_ge_console.sessions.server.supervise import EXIT_FILE, SUPERVISOR_PID_FILE, read_number

pytestmark = pytest.mark.server
CRASHING_SHAPE = [2**62]  # one of the four bodies Triton 2.51's HTTP JSON parser segfaults on


def send_crashing_body(record: SessionRecord) -> None:
    """POST the inference body that crashes Triton 2.51 (it closes the connection as it dies)."""
    where = urlsplit(record.http_url)
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": CRASHING_SHAPE, "datatype": "FP32",
                                   "data": [1.0]}]})
    connection = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=30)
    try:
        connection.request("POST", "/v2/models/echo/infer", body, {"Content-Type": "application/json"})
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            connection.getresponse().read()
    finally:
        connection.close()


def serves(record: SessionRecord) -> bool:
    """Whether a request to the echo model succeeds now (a refused or failed one: no)."""
    try:
        return answers(record)
    except Exception:
        return False


@pytest.fixture
def three_instances(tmp_path: Path) -> Path:
    """A repository whose echo model runs three Python stubs."""
    repository = tmp_path / "repo"
    write_echo_model(repository, instances=3)
    return repository


class Traffic:
    """Requests from a few threads until stopped (bounded: at most `limit` each), as a crash comes."""

    def __init__(self, record: SessionRecord, threads: int = 4, limit: int = 5000) -> None:
        self.record, self.limit = record, limit
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(threads)]

    def __enter__(self) -> Traffic:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)

    def _loop(self) -> None:
        """Send until stopped; a failure (the server gone) just ends this thread's turn."""
        for _ in range(self.limit):
            if self.stop.is_set() or not serves(self.record):
                return


def test_a_crashed_servers_stubs_are_ended_before_its_exit_is_recorded(three_instances: Path) -> None:
    assert main(["up", str(three_instances), "--name", "crashy", "--timeout", "120"]) == 0
    record = Registry().load("crashy")
    assert record.pid is not None and record.session_dir is not None
    stubs = [instance.pid for instance in stub_instances(record.pid).get(("echo", "1"), ())]
    assert len(stubs) == 3
    with Traffic(record):
        wait_until(lambda: serves(record))
        send_crashing_body(record)
        code = wait_until(lambda: read_number(record.session_dir / EXIT_FILE), timeout=30, interval=0.005,
                          what="the supervisor recording the crash")
        left = [pid for pid in stubs if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert code == -11  # SIGSEGV: Triton 2.51 still crashes on this body
    assert left == [], f"stubs still running once the crash was recorded: {left}"


@pytest.fixture
def watched(three_instances: Path) -> Iterator[SessionRecord]:
    """A session started with --restart on-crash."""
    assert main(["up", str(three_instances), "--name", "watched", "--timeout", "120",
                 "--restart", "on-crash"]) == 0
    yield Registry().load("watched")


def status_json(name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    """`status NAME --json`, parsed."""
    capsys.readouterr()
    main(["status", name, "--json"])
    data: dict[str, object] = json.loads(capsys.readouterr().out)
    return data


def test_restart_on_crash_restarts_a_segfaulted_server_that_then_serves(
        watched: SessionRecord, capsys: pytest.CaptureFixture[str]) -> None:
    assert serves(watched)
    first_pid = watched.pid
    send_crashing_body(watched)

    def restarted_and_said_serving() -> dict[str, object] | None:
        # status reads ready as soon as the models answer READY; the supervisor says "serving" at its next
        # poll (0.2 s later), so the event is waited for too, never assumed at the first ready reading
        data = status_json("watched", capsys)
        said = [event["kind"] for event in data["events"]]  # type: ignore[attr-defined]
        return data if data["state"] == "ready" and data["pid"] != first_pid and "serving" in said else None

    data = wait_until(restarted_and_said_serving, timeout=120, interval=0.2,
                      what="the server restarted, ready and said serving")
    assert data["restart"] == "on-crash" and data["restarts"] == 1
    kinds = [event["kind"] for event in data["events"]]  # type: ignore[attr-defined]
    assert kinds == ["crashed", "restarted", "serving"], data["events"]
    assert "server was killed by SIGSEGV; restarting in 1s (restart 1 of 5)" in str(data["events"])
    assert serves(Registry().load("watched")), "the restarted server answers requests"

    assert "restarted 1× after a crash" in console_header("watched").plain

    capsys.readouterr()
    assert main(["status", "watched"]) == 0
    text = capsys.readouterr().out
    assert "restart: on-crash (1 restart)" in text and "crashed: server was killed by SIGSEGV" in text

    assert stopped_by_down_for_good("watched")
    events = status_json("watched", capsys)["events"]
    assert [event["kind"] for event in events] == kinds, "down is no crash: nothing restarted"  # type: ignore[attr-defined]


def console_header(name: str) -> Text:
    """The console's header line after one poll of the session."""
    source = LiveSource.from_record(Registry().load(name), npu_smi=None, sample_traces=False)
    try:
        connection = Connection(name, 1.0, last_good=source.poll())
    finally:
        source.poller.close()
    return header_line(header_facts(connection))


def stopped_by_down_for_good(name: str) -> bool:
    """`down` stops the session and its supervisor leaves without restarting anything."""
    folder = Registry().load(name).session_dir
    assert folder is not None
    supervisor = read_number(folder / SUPERVISOR_PID_FILE)
    assert main(["down", name]) == 0
    stopped = Registry().load(name)
    wait_until(lambda: supervisor is None or not psutil.pid_exists(supervisor)
               or psutil.Process(supervisor).status() == psutil.STATUS_ZOMBIE, what="the supervisor gone")
    return stopped.state == "stopped" and not psutil.pid_exists(stopped.pid or 0)
