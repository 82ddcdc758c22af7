"""The session registry: YAML round trip, clear errors for corrupt files, dead-process detection."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from triton_ge_console.sessions.server import paths
from triton_ge_console.sessions.server.registry import (
    DEAD,
    READY,
    STOPPED,
    Registry,
    RegistryError,
    SessionNotFound,
    SessionRecord,
    SessionStopped,
    effective_state,
    log_tail,
    process_create_time,
    process_start_ticks,
    require_running,
    resolve_token,
    store_token,
)


def make_record(name: str = "demo", **changes: object) -> SessionRecord:
    """A plausible launched-session record."""
    record = SessionRecord(
        name=name, pid=os.getpid(), started_at=time.time(), http_url="http://127.0.0.1:8000",
        grpc_url="127.0.0.1:8001", metrics_url="http://127.0.0.1:8002/metrics",
        repository=Path("/tmp/repo"), spec=None, backend_dir=Path("/tmp/backends"),
        log_path=None, token_ref=None, attached=False, session_dir=Path("/tmp/run"),
        state=READY, pid_create_time=process_create_time(os.getpid()), models=("echo",),
    )
    return record.replace(**changes)


def test_registry_lives_in_the_state_dir_from_the_environment(state_dir: Path) -> None:
    assert Registry().root == state_dir / "sessions"
    assert paths.session_dir("demo") == state_dir / "runs" / "demo"


def test_save_and_load_round_trip_every_field() -> None:
    registry = Registry()
    record = make_record(log_path=Path("/tmp/run/server.log"), exit_code=3, token_ref="env:TOKEN")
    path = registry.save(record)
    assert path.name == "demo.yaml"
    assert registry.load("demo") == record
    assert registry.names() == ["demo"]
    assert not list(registry.root.glob("*.tmp"))


def test_list_scan_and_remove() -> None:
    registry = Registry()
    registry.save(make_record("a"))
    registry.save(make_record("b"))
    assert [r.name for r in registry.list()] == ["a", "b"]
    registry.remove("a")
    registry.remove("a")
    assert registry.names() == ["b"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: demo\nhttp_url: [unclosed\n", "line 3: corrupt session file"),
        ("- just\n- a list\n", "not a session file"),
        ("name: demo\nstarted_at: 1.0\n", "missing field 'http_url'"),
        ("name: demo\nstarted_at: 1.0\nhttp_url: http://x:1\npid: twelve\n", "field 'pid' has a bad value"),
        ("name: demo\nstarted_at: 1.0\nhttp_url: http://x:1\nstate: dancing\n", "field 'state' must be"),
    ],
)
def test_a_corrupt_session_file_gives_one_line_naming_it(text: str, expected: str) -> None:
    registry = Registry()
    registry.root.mkdir(parents=True)
    path = registry.path_for("demo")
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RegistryError) as caught:
        registry.load("demo")
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert expected in message
    assert "\n" not in message


def test_scan_reports_a_corrupt_file_without_hiding_the_others() -> None:
    registry = Registry()
    registry.save(make_record("good"))
    registry.path_for("bad").write_text("{{{", encoding="utf-8")
    records, errors = registry.scan()
    assert [r.name for r in records] == ["good"]
    assert len(errors) == 1 and "bad.yaml" in str(errors[0])
    with pytest.raises(RegistryError):
        registry.list()


def test_resolve_needs_a_name_unless_exactly_one_session_exists() -> None:
    registry = Registry()
    with pytest.raises(SessionNotFound, match="no sessions"):
        registry.resolve(None)
    registry.save(make_record("only"))
    assert registry.resolve(None).name == "only"
    registry.save(make_record("second"))
    with pytest.raises(SessionNotFound, match=r"2 running sessions \(only, second\): name one"):
        registry.resolve(None)
    with pytest.raises(SessionNotFound, match="no session named 'third'"):
        registry.resolve("third")


def test_stopped_dead_and_corrupt_sessions_leave_the_only_running_one_the_default() -> None:
    registry = Registry()
    registry.save(make_record("old", state=STOPPED))
    registry.save(make_record("crashed", pid=2**22 + 1))  # no such process: dead
    registry.save(make_record("live"))
    registry.path_for("broken").write_text("name: [oops\n")
    assert registry.resolve(None).name == "live"
    registry.remove("live")
    with pytest.raises(RegistryError, match=r"broken\.yaml"):  # it might be the one meant: say it is broken
        registry.resolve(None)
    registry.remove("broken")
    with pytest.raises(SessionNotFound, match="no session runs among crashed, old: name one"):
        registry.resolve(None)
    with pytest.raises(SessionStopped, match=r"no session runs \(crashed is dead; old is stopped\)"):
        registry.resolve(None, running=True)  # for a verb that needs a server, naming one is no way out
    with pytest.raises(SessionStopped, match="session 'old' is stopped"):
        require_running(registry.load("old"))
    with pytest.raises(SessionStopped, match="session 'crashed' is dead"):
        require_running(registry.load("crashed"))


def test_bad_session_names_are_refused() -> None:
    with pytest.raises(ValueError, match="bad session name"):
        Registry().path_for("../escape")


def test_a_session_whose_process_is_gone_reads_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    created = process_create_time(child.pid)
    child.wait()
    record = make_record(pid=child.pid, pid_create_time=created)
    assert effective_state(record) == DEAD
    assert effective_state(make_record()) == READY


def test_a_live_server_reads_alive_when_the_boot_time_moved() -> None:
    """psutil's create_time is the boot time plus the start in clock ticks, and the kernel's boot time
    (/proc/stat btime: the wall clock less the time since boot) moves by a second as the clock is adjusted;
    seen: a serving session's create_time read 1.0 s later than recorded, and it read dead (`down --forget`
    then forgot it and removed its shared memory while it ran). The start in ticks never moves."""
    created = process_create_time(os.getpid())
    assert created is not None
    record = make_record(pid_create_time=created - 1.0, pid_start_ticks=process_start_ticks(os.getpid()))
    assert effective_state(record) == READY


def test_an_older_record_without_start_ticks_allows_the_boot_times_second() -> None:
    """A record written before start ticks were kept has only the create time: a second either way is the
    boot time moving, not another process."""
    created = process_create_time(os.getpid())
    assert created is not None
    assert effective_state(make_record(pid_create_time=created + 1.0)) == READY


def test_a_reused_pid_reads_dead_by_its_start_ticks() -> None:
    ticks = process_start_ticks(os.getpid())
    assert ticks is not None
    record = make_record(pid_create_time=process_create_time(os.getpid()), pid_start_ticks=ticks - 100)
    assert effective_state(record) == DEAD


def test_a_reused_pid_reads_dead() -> None:
    record = make_record(pid_create_time=(process_create_time(os.getpid()) or 0) - 3600)
    assert effective_state(record) == DEAD


def test_stopped_and_attached_sessions_are_not_judged_by_pid() -> None:
    assert effective_state(make_record(pid=None, state=STOPPED)) == STOPPED
    assert effective_state(make_record(pid=None, attached=True)) == READY


def test_log_tail_gives_the_last_non_empty_lines(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(f"line {i}\n\n" for i in range(30)), encoding="utf-8")
    assert log_tail(make_record(log_path=log), 3) == ["line 27", "line 28", "line 29"]
    assert log_tail(make_record(log_path=tmp_path / "missing.log")) == []


def test_tokens_are_kept_by_reference_in_a_private_file(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    ref = store_token(tmp_path / "run", "s3cret")
    assert "s3cret" not in ref
    token_file = Path(ref.split(":", 1)[1])
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert resolve_token(ref) == "s3cret"
    monkeypatch.setenv("GE_TOKEN", "from-env")
    assert resolve_token("env:GE_TOKEN") == "from-env"
    assert resolve_token(None) is None
    assert resolve_token("file:/nonexistent/token") is None
