"""`up` reports how long Triton has been loading the models (Triton itself says nothing meanwhile), and
says a session is up only once its metrics port answers too."""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.models import write_echo_model
from triton_ge_console.cli import main
from triton_ge_console.repository.progress import Feed
from triton_ge_console.sessions import launcher
from triton_ge_console.sessions.launcher import PORT_RACE_ATTEMPTS, LaunchError, LaunchOptions, launch
from triton_ge_console.sessions.lifecycle import down
from triton_ge_console.sessions.live import LiveSource
from triton_ge_console.sessions.server.process import Ports, free_port, http_ok, pick_ports
from triton_ge_console.sessions.server.registry import Registry


@pytest.mark.server  # launches a real tritonserver
def test_the_wait_for_ready_models_reports_its_elapsed_time(tmp_path: Path) -> None:
    """A model whose initialize takes 1.5 s: the elapsed hook hears "loading echo" past a second, and
    the step lines still come through the same feed."""
    repo = tmp_path / "repo"
    model_py = write_echo_model(repo) / "1" / "model.py"
    slow = "    def initialize(self, args):\n        __import__('time').sleep(1.5)\n"
    model_py.write_text(model_py.read_text().replace("    def initialize(self, args):\n", slow))
    lines: list[str] = []
    waits: list[tuple[str, float]] = []
    registry = Registry()
    record = launch(LaunchOptions(source=repo, name="slowish", timeout=120), registry,
                    Feed(lines.append, elapsed=lambda what, seconds: waits.append((what, seconds))))
    try:
        assert http_ok(record.metrics_url or "")  # up means the console's first poll finds metrics
        loading = [seconds for what, seconds in waits if what == "loading echo"]
        assert max(loading) >= 1.0
        metrics_wait = f"waiting for metrics port {urlsplit(record.metrics_url or '').port}"
        assert {what for what, _ in waits} <= {"loading echo", metrics_wait}
        assert any(line.startswith("repository: ") for line in lines)
    finally:
        down(record, registry)


@pytest.mark.server  # launches a real tritonserver
def test_the_last_port_given_to_triton_is_the_one_recorded(tmp_path: Path) -> None:
    """Triton obeys the last --metrics-port / --http-port / --grpc-port of its command line, so the spec's
    or the API's extra arguments move a port away from the one ge-console picked: the record (and the wait,
    which named the picked metrics port and timed out) must follow Triton, in either spelling of an option.
    Reproduced first: the record kept the picked ports and `up` timed out on the metrics port."""
    write_echo_model(tmp_path / "repo")
    picked, metrics, http, grpc = free_port(), free_port(), free_port(), free_port()
    registry = Registry()
    moved = (f"--metrics-port={metrics}", "--http-port", str(http), f"--grpc-port={grpc}")
    record = launch(LaunchOptions(source=tmp_path / "repo", name="movedports", metrics_port=picked,
                                  timeout=60, extra_args=moved), registry)
    try:
        assert [urlsplit(record.metrics_url or "").port, urlsplit(record.http_url).port] == [metrics, http]
        assert record.grpc_url == f"127.0.0.1:{grpc}"
        assert http_ok(record.metrics_url or "")
        assert registry.load("movedports").metrics_url == record.metrics_url
    finally:
        down(record, registry)


def test_a_port_triton_cannot_take_is_one_clear_line_before_any_start(tmp_path: Path) -> None:
    """A non-numeric port in the extra arguments is refused up front, naming the option, nothing started."""
    write_echo_model(tmp_path / "repo")
    registry = Registry()
    with pytest.raises(LaunchError) as refused:
        launch(LaunchOptions(source=tmp_path / "repo", name="badport", timeout=20,
                             extra_args=("--metrics-port", "80x2")), registry)
    assert str(refused.value) == "tritonserver argument --metrics-port=80x2: not a port number (1-65535)"
    assert not registry.exists("badport")


def test_a_listen_address_in_the_extra_arguments_is_one_clear_line_before_any_start(tmp_path: Path) -> None:
    """An extra --grpc-address would expose the server past the token guard; refused, nothing started."""
    write_echo_model(tmp_path / "repo")
    registry = Registry()
    with pytest.raises(LaunchError, match=r"^tritonserver argument --grpc-address: give the listen address"):
        launch(LaunchOptions(source=tmp_path / "repo", name="badaddress", timeout=20,
                             extra_args=("--grpc-address", "0.0.0.0")), registry)
    assert not registry.exists("badaddress")


@pytest.mark.server  # launches a real tritonserver
@pytest.mark.parametrize("turned_off", [("--allow-metrics=false",), ("--allow-metrics", "0")])
def test_up_with_metrics_turned_off_records_none_and_readers_say_off(
    tmp_path: Path, turned_off: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    """--allow-metrics=false: Triton opens no metrics port, so `up` must not wait for one, the record says
    metrics are off (no URL) and its readers show that instead of polling a refused port.
    Reproduced first: the record kept a metrics URL and a poll reported "connection refused"."""
    write_echo_model(tmp_path / "repo")
    registry = Registry()
    record = launch(LaunchOptions(source=tmp_path / "repo", name="nometrics", timeout=120,
                                  extra_args=turned_off), registry)
    try:
        assert record.metrics_url is None
        assert registry.load("nometrics").metrics_url is None
        snapshot = LiveSource.from_record(record, npu_smi=None, sample_traces=False).poll()
        assert snapshot.live and snapshot.error is None
        capsys.readouterr()
        assert main(["status", "nometrics"]) == 0
        out = capsys.readouterr().out
        assert "metrics off" in out and "refused" not in out
    finally:
        down(record, registry)


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port this test listens on, as another program taking a picked port would."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield int(busy.getsockname()[1])


def picking_taken(monkeypatch: pytest.MonkeyPatch, kind: str, port: int, times: int) -> list[Ports]:
    """Make the launcher's first `times` port picks hand out `port` for `kind` (taken since it was found
    free, as in a race), later picks free ones; the picks made, in order."""
    picks: list[Ports] = []

    def pick(*args: object, **kwargs: object) -> Ports:
        chosen = pick_ports(*args, **kwargs)  # type: ignore[arg-type]
        chosen = dataclasses.replace(chosen, **{kind: port}) if len(picks) < times else chosen
        picks.append(chosen)
        return chosen

    monkeypatch.setattr(launcher, "pick_ports", pick)
    return picks


@pytest.mark.server  # launches a real tritonserver
@pytest.mark.parametrize("kind", ["http", "grpc", "metrics"])
def test_a_picked_port_taken_before_triton_binds_it_is_picked_again(
    tmp_path: Path, kind: str, held_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A port picked free but taken before Triton binds it: `up` retries on fresh ports, saying so.
    Reproduced first: Triton 2.51 says "Socket '127.0.0.1:PORT' already in use" for its HTTP and metrics
    ports, which the retry did not recognise (it only knew gRPC's "Address already in use")."""
    write_echo_model(tmp_path / "repo")
    picks = picking_taken(monkeypatch, kind, held_port, times=1)
    lines: list[str] = []
    registry = Registry()
    record = launch(LaunchOptions(source=tmp_path / "repo", name="raced", timeout=120), registry,
                    lines.append)
    try:
        assert len(picks) == 2 and getattr(picks[1], kind) != held_port
        assert urlsplit(record.http_url).port == picks[1].http and http_ok(record.metrics_url or "")
        retried = [line for line in lines if "retrying" in line]
        assert len(retried) == 1 and f"{kind} port {held_port} was taken" in retried[0], lines
    finally:
        down(record, registry)


@pytest.mark.server  # launches a real tritonserver, PORT_RACE_ATTEMPTS times
def test_a_picked_port_taken_on_every_attempt_is_one_line_naming_it_and_triton_words(
    tmp_path: Path, held_port: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every attempt finds its picked HTTP port taken: `up` gives up in one line naming the port and
    Triton's own words, and leaves no session behind."""
    write_echo_model(tmp_path / "repo")
    picks = picking_taken(monkeypatch, "http", held_port, times=PORT_RACE_ATTEMPTS)
    assert main(["up", str(tmp_path / "repo"), "--name", "raced", "--timeout", "120"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert f"http port {held_port} was taken" in err and f"{PORT_RACE_ATTEMPTS} attempts" in err
    assert f"Socket '127.0.0.1:{held_port}' already in use" in err
    assert len(picks) == PORT_RACE_ATTEMPTS and not Registry().exists("raced")


@pytest.mark.parametrize("listen", ["127.0.0.1", "0.0.0.0"])
def test_an_exposed_metrics_address_in_the_extra_arguments_is_refused_before_any_start(
    tmp_path: Path, listen: str
) -> None:
    """Triton's metrics port takes no token, so an extra --metrics-address off loopback would expose it
    unguarded, exposed or not the listen address: refused in one line, as an exposed --listen without a
    token is. Reproduced first: the server started with its metrics on every interface."""
    write_echo_model(tmp_path / "repo")
    registry = Registry()
    with pytest.raises(LaunchError, match=r"^tritonserver argument --metrics-address=0\.0\.0\.0: "):
        launch(LaunchOptions(source=tmp_path / "repo", name="openmetrics", timeout=60, listen=listen,
                             token="metrics-s3cret", extra_args=("--metrics-address", "0.0.0.0")), registry)
    assert not registry.exists("openmetrics")


@pytest.mark.server  # launches a real tritonserver listening on every interface (token-locked)
@pytest.mark.parametrize(("extra", "said"), [
    (("--metrics-address=127.0.0.2",), "metrics stay on 127.0.0.2 (loopback only: no token guards them)"),
    (("--allow-metrics=false",), "metrics are off"),
])
def test_the_exposed_listen_warning_says_where_metrics_really_listen(
    tmp_path: Path, extra: tuple[str, ...], said: str
) -> None:
    """The warning for an exposed --listen follows Triton's last word on metrics in the extra arguments.
    Reproduced first: it said "metrics stay on 127.0.0.1" whatever they said."""
    write_echo_model(tmp_path / "repo")
    lines: list[str] = []
    registry = Registry()
    record = launch(LaunchOptions(source=tmp_path / "repo", name="exposedmetrics", timeout=120,
                                  listen="0.0.0.0", token="metrics-s3cret", extra_args=extra),
                    registry, lines.append)
    try:
        warnings = [line for line in lines if line.startswith("warning: exposing Triton on 0.0.0.0")]
        assert len(warnings) == 1 and warnings[0].endswith(f"; {said}"), lines
        moved = "127.0.0.2" in said
        assert record.metrics_url == (f"http://127.0.0.2:{urlsplit(record.metrics_url or '').port}/metrics"
                                      if moved else None)
        assert not moved or http_ok(record.metrics_url or "")
    finally:
        down(record, registry)
