"""Hostile input gets one clear line: each case issue 16 tried is refused with where and why, no traceback."""

from __future__ import annotations

import logging
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.models import save_external, set_external_location
from triton_ge_console.cli import main
from triton_ge_console.console.console_cli import redact_keys
from triton_ge_console.repository.validate import validate_path
from triton_ge_console.sessions.server.process import free_port
from triton_ge_console.sessions.server.registry import Registry, SessionRecord

CLI = [sys.executable, "-m", "triton_ge_console.cli"]
MODEL = """\
models:
  - name: llama_model
    backend: ge
    source: demo:llama
{extra}"""


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The CLI in-process: exit code and stderr (argparse's usage errors included)."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def one_line(err: str) -> str:
    """The single stderr line of a refusal (no traceback, no second line)."""
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("usage:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def spec(tmp_path: Path, extra: str) -> Path:
    """A one-model spec with extra lines under the model."""
    path = tmp_path / "deploy.yaml"
    path.write_text(MODEL.format(extra=extra), encoding="utf-8")
    return path


@pytest.mark.parametrize(("extra", "where", "said"), [
    ("    inputs: [{name: input_ids, data_type: INT64, dims: [99999999999999999999]}]\n",
     ":5:", "dims[0]: 99999999999999999999 does not fit Triton's int64 field"),
    ("    inputs: [{name: input_ids, data_type: INT64, dims: [9223372036854775807]}]\n",
     ":5:", "overflows int64"),
    ("    max_batch_size: 99999999999999999999\n", ":5:", "max_batch_size: must be <= 2147483647"),
    ("    instance_group: {count: 100000}\n", ":5:", "count: must be <= 64"),
    ("    versions: 1\n", ":5:", "versions: must be a list of version numbers"),
    ("    parameters: {om_model_path: ../../../../etc/passwd}\n", ":5:", "leaves the model folder"),
    ("    thresholds: {p99_ms: .nan}\n", ":5:", "p99_ms: must be a finite number, not nan"),
])
@pytest.mark.parametrize("command", ["build", "up"])
def test_a_bad_number_or_path_in_a_spec_is_an_error_at_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, extra: str, where: str,
        said: str) -> None:
    path = spec(tmp_path, extra)
    argv = [command, str(path), "-o", str(tmp_path / "repo")] if command == "build" else [command, str(path)]
    code, err = run(argv, capsys)
    line = one_line(err)
    assert code == 1 and f"{path}{where}" in line and said in line, line
    assert Registry().names() == []


def test_deep_nesting_and_a_huge_spec_are_refused_with_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text("[" * 5000, encoding="utf-8")
    code, err = run(["build", str(deep), "-o", str(tmp_path / "repo")], capsys)
    assert code == 1 and "nested more than 32 levels deep" in one_line(err)
    huge = tmp_path / "huge.yaml"
    huge.write_text("# padding\n" * 200_000, encoding="utf-8")
    code, err = run(["up", str(huge)], capsys)
    assert code == 1 and "too large for a deployment spec" in one_line(err)


def test_a_file_that_is_not_a_spec_is_quoted_as_a_short_excerpt(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "".join(f"user{i}:x:{i}:{i}::/home/user{i}:/bin/sh\n" for i in range(200))
    passwd = tmp_path / "passwd"
    passwd.write_text(text, encoding="utf-8")
    code, err = run(["up", str(passwd)], capsys)
    line = one_line(err)
    assert code == 1 and "must be a mapping" in line and len(line) < 300 and "user199" not in line, line


@pytest.mark.parametrize(("argv", "option", "said"), [
    (["up", "x.yaml", "--metrics-port", "99999"], "--metrics-port", "99999 is not a port (0-65535)"),
    (["up", "x.yaml", "--http-port", "70000"], "--http-port", "70000 is not a port (0-65535)"),
    (["up", "x.yaml", "--http-port", "-1"], "--http-port", "-1 is not a port (0-65535)"),
    (["up", "x.yaml", "--grpc-port", "http"], "--grpc-port", "'http' is not a port number"),
    (["serve", "--port", "99999"], "--port", "99999 is not a port (0-65535)"),
    (["up", "x.yaml", "--timeout", "-1"], "--timeout", "-1 must be a positive number of seconds"),
    (["down", "--timeout", "nan"], "--timeout", "nan must be a positive number of seconds"),
])
def test_ports_and_timeouts_are_range_checked_naming_the_option(
        capsys: pytest.CaptureFixture[str], argv: list[str], option: str, said: str) -> None:
    code, err = run(argv, capsys)
    last = err.strip().splitlines()[-1]  # argparse's usage lines come first
    assert code == 2 and "Traceback" not in err and f"argument {option}: {said}" in last, err


def test_spec_ports_are_range_checked_at_their_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deploy.yaml"
    path.write_text("server:\n  metrics_port: 99999\n" + MODEL.format(extra=""), encoding="utf-8")
    code, err = run(["up", str(path)], capsys)
    assert code == 1 and f"{path}:2:17 server.metrics_port: must be <= 65535" in one_line(err)


def test_validate_refuses_a_model_path_leaving_the_folder_and_names_an_absolute_one(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.om"
    outside.write_bytes(b"om")
    for key, value, severity, said in (
        ("om_model_path", "../../../../etc/passwd", "error", "leaves the model folder"),
        ("onnx_model_path", "../../x.onnx", "error", "leaves the model folder"),
        ("om_model_path", str(outside), "warning", f"om_model_path is absolute: {outside}"),
    ):
        folder = tmp_path / "repo" / f"m_{severity}_{key}"
        (folder / "1").mkdir(parents=True)
        (folder / "1" / "model.onnx").write_bytes(b"onnx")
        (folder / "config.pbtxt").write_text(
            f'name: "{folder.name}"\nbackend: "ge"\nmax_batch_size: 8\n'
            f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n', encoding="utf-8")
        found = [p for p in validate_path(folder).problems if said in p.message]
        assert [p.severity for p in found] == [severity], validate_path(folder).problems
        assert found[0].line == 4, "the parameter's own line"


def test_relative_model_paths_inside_the_folder_stay_allowed(tmp_path: Path) -> None:
    from triton_ge_console.backend_glue.settings import leaves_model_folder

    assert not leaves_model_folder("model.om") and not leaves_model_folder("../model.om")
    assert not leaves_model_folder("2/model.om")
    assert leaves_model_folder("../../model.om") and leaves_model_folder("../../../../etc/passwd")


@pytest.mark.parametrize(("url", "said"), [
    ("http://127.0.0.1:{port}/../x", "an endpoint has no path"),
    ("http://127.0.0.1:{port}/v2", "an endpoint has no path"),
    ("http://127.0.0.1:99999", "the port is not a number in 0-65535"),
    ("http://user:pw@127.0.0.1:{port}", "credentials, a query or a fragment are not taken here"),
    ("ftp://127.0.0.1:{port}", "expected http://HOST:PORT"),
])
def test_attach_refuses_a_url_with_a_path_or_a_bad_port(
        capsys: pytest.CaptureFixture[str], url: str, said: str) -> None:
    code, err = run(["attach", url.format(port=free_port()), "--name", "remote"], capsys)
    assert code == 1 and said in one_line(err), err
    assert Registry().names() == []


def test_the_serve_key_never_reaches_a_log_line() -> None:
    record = logging.LogRecord("aiohttp.access", logging.INFO, __file__, 1,
                               '127.0.0.1 "GET /?key=%s&x=1 HTTP/1.1" 200', ("s3cretKEY",), None)
    assert redact_keys(record) and "s3cretKEY" not in record.getMessage()
    assert "key=…&x=1" in record.getMessage()


def test_serve_prints_the_key_once_and_logs_requests_without_it(tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen([*CLI, "serve", "--port", str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
                              env={**_env(), "COLUMNS": "200"})
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        key = re.search(r"\?key=([\w-]+)", first)
        assert key, first
        _get_until_served(f"http://127.0.0.1:{port}/?key={key.group(1)}")
    finally:
        server.send_signal(signal.SIGINT)
        rest, _ = server.communicate(timeout=30)
    assert "GET /?key=" in rest, rest  # the access log did log the request...
    assert key.group(1) not in rest, rest  # ...without the key


def _get_until_served(url: str) -> None:
    """GET url once the server listens (it prints its URL before it binds)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                assert response.status == 200
                return
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.parametrize("argv", [["status", "old"], ["status", "old", "--json"], ["ls"],
                                  ["validate", "--help"]])
def test_a_closed_stdout_ends_quietly(argv: list[str]) -> None:
    Registry().save(SessionRecord(  # a stopped session, so `status` has something to print
        name="old", pid=None, started_at=time.time(), http_url=f"http://127.0.0.1:{free_port()}",
        grpc_url=None, metrics_url=None, repository=None, spec=None, backend_dir=None, log_path=None,
        token_ref=None, attached=False, session_dir=None, state="stopped"))
    reader = subprocess.Popen([*CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.close()  # like `| head -0`: the reader is gone before anything is written
    err = reader.stderr.read().decode()
    assert reader.wait(timeout=60) in (0, 1) and err == "", err


def _env() -> dict[str, str]:
    """This process's environment (the worktree's sources on PYTHONPATH, the test's state dir)."""
    import os

    return dict(os.environ)


@pytest.mark.parametrize(("location", "refused"), [
    ("../../../../etc/passwd", True), ("/etc/passwd", True), ("weights.bin", False), ("../w.bin", True),
])
def test_validate_refuses_onnx_external_data_leaving_the_model_folder(
        tmp_path: Path, location: str, refused: bool) -> None:
    model = tmp_path / "repo" / "m"
    set_external_location(save_external(model / "1" / "model.onnx", layers=1), location)
    (model / "config.pbtxt").write_text('name: "m"\nbackend: "ge"\nmax_batch_size: 0\n', encoding="utf-8")
    said = [p for p in validate_path(model).errors if "outside the model's folder" in p.message]
    assert bool(said) == refused, validate_path(model).problems
    if refused:  # ONNX Runtime reads external data below the ONNX's own folder only
        assert f"'{location}'" in said[0].message


@pytest.mark.parametrize(("token", "said"), [
    ("two words", "printable ASCII without spaces"), ("a\r\nx-injected: 1", "printable ASCII without spaces"),
    ("key=value", "must not contain any of , : ="), ("a,b", "must not contain any of , : ="),
])
def test_a_token_triton_or_http_could_not_carry_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], token: str, said: str) -> None:
    code, err = run(["up", str(spec(tmp_path, "")), "--token", token], capsys)
    assert code == 1 and said in one_line(err) and token not in err
    code, err = run(["attach", f"http://127.0.0.1:{free_port()}", "--name", "r", "--token", token], capsys)
    assert code == 1 and said in one_line(err) and token not in err
    assert Registry().names() == []
