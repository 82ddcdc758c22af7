"""`ge-console validate` and `ge-console convert`: output, --json, and every exit code."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.models import write_model, write_one_node
from triton_ge_console.cli import main

FAKES = ROOT / "tests" / "fakes"
GOOD = 'name: "m"\nbackend: "python"\nmax_batch_size: 4\n'


def _model(repository: Path, name: str, config: str) -> Path:
    """A model folder holding config.pbtxt and version 1 with model.py."""
    return write_model(repository, name, config, "# model\n", "model.py")


def test_validate_clean_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A valid repository: no findings on stdout, the ok verdict as one line on stderr, exit 0."""
    _model(tmp_path, "m", GOOD)
    assert main(["validate", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"{tmp_path}: ok: 0 error(s), 0 warning(s) in 1 model(s)\n"


def test_validate_warnings_still_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Warnings are printed but do not fail."""
    folder = _model(tmp_path, "m", GOOD + "instance_group [ { kind: KIND_GPU } ]\n")
    assert main(["validate", str(folder)]) == 0
    out = capsys.readouterr().out
    assert f"{folder}/config.pbtxt:4:20 instance_group[0].kind: warning: instance group m_0" in out


def test_validate_errors_exit_1_with_positions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each error is one line on stdout, file:line:col field: message; the verdict on stderr; exit 1."""
    config = (
        _model(tmp_path, "m", GOOD + "dynamic_batching { preferred_batch_size: [ 0 ] }\n") / "config.pbtxt"
    )
    assert main(["validate", str(config)]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        f"{config}:4:44 dynamic_batching.preferred_batch_size[0]: dynamic batching preferred size must be "
        "positive for m",
    ]
    assert captured.err == f"{config}: invalid: 1 error(s), 0 warning(s) in 1 config\n"


def test_validate_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints the report's dict; the exit code still says ok or not."""
    _model(tmp_path, "m", 'name: "m"\nbackend: "python"\nmax_batch_size: -1\n')
    assert main(["validate", str(tmp_path), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["models"] == ["m"]
    assert data["problems"][0]["line"] == 3 and data["problems"][0]["field"] == "max_batch_size"


def test_validate_missing_path_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A PATH that does not exist is a usage error: one line on stderr, exit 2."""
    assert main(["validate", str(tmp_path / "nope")]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"ge-console: error: {tmp_path / 'nope'}: no such file or directory\n"
    assert captured.out == ""


def test_validate_without_path_is_usage(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse's own usage error is exit 2."""
    with pytest.raises(SystemExit) as exited:
        main(["validate"])
    assert exited.value.code == 2


def test_built_seed_repository_validates(tmp_path: Path) -> None:
    """The issue's done-when: `ge-console build examples/seed.yaml -o repo` then `validate repo` succeeds."""
    repo = tmp_path / "repo"
    command = [sys.executable, "-m", "triton_ge_console.cli"]
    build = subprocess.run([*command, "build", str(ROOT / "examples" / "seed.yaml"), "-o", str(repo)],
                           capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert build.returncode == 0, build.stderr
    validate = subprocess.run([*command, "validate", str(repo)], capture_output=True, text=True, timeout=120,
                              check=False)  # fmt: skip
    assert validate.returncode == 0, validate.stdout
    assert validate.stderr.startswith(f"{repo}: ok: 0 error(s)")


@pytest.fixture
def fake_atc(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake atc first on PATH."""
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")


def test_convert_writes_om_exit_0(fake_atc: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ATC found and succeeding: the OM is written and named on stdout."""
    model = write_one_node(tmp_path / "m.onnx")
    args = ["convert", str(model), "--soc-version", "Ascend310P3", "-o", str(tmp_path / "m.om"),
            "--input-shape", "x:-1,4", "--dynamic-batch-size", "1,2,4,8"]  # fmt: skip
    assert main(args) == 0
    assert (tmp_path / "m.om").is_file()
    assert capsys.readouterr().out.startswith(f"wrote {tmp_path / 'm.om'} (")


def test_converted_om_makes_a_ge_model_run_on_npu(fake_atc: None, tmp_path: Path) -> None:
    """With the OM in place, a `ge` model's om_model_path resolves and validation has nothing to say."""
    folder = tmp_path / "repo" / "m"
    (folder / "1").mkdir(parents=True)
    model = write_one_node(folder / "1" / "model.onnx")
    param = 'parameters { key: "om_model_path" value { string_value: "model.om" } }\n'
    (folder / "config.pbtxt").write_text('name: "m"\nbackend: "ge"\n' + param, encoding="utf-8")
    assert main(["validate", str(folder)]) == 0
    assert (
        main(["convert", str(model), "--soc-version", "Ascend910B1", "-o", str(folder / "1" / "model")]) == 0
    )
    from triton_ge_console.repository.validate import validate_path

    assert validate_path(folder).problems == ()


def test_convert_atc_failure_exit_1(
    fake_atc: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ATC rejecting the SoC: its failure banner and E10001 line reach stderr, exit 1."""
    model = write_one_node(tmp_path / "m.onnx")
    assert main(["convert", str(model), "--soc-version", "Ascend999", "-o", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert "ge-console: error: atc failed (exit 255):" in err
    assert "  E10001: Value Ascend999 for parameter --soc_version is invalid." in err


def test_convert_bad_arguments_exit_2_before_atc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ATC's own argument rules are checked first: no ATC needed to learn the gears are wrong."""
    model = write_one_node(tmp_path / "m.onnx")
    args = ["convert", str(model), "--soc-version", "Ascend310P3", "-o", str(tmp_path / "m"),
            "--input-shape", "x:4,4", "--dynamic-batch-size", "1,4,4"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line.split(":")[2].strip() for line in err] == ["E10039", "E10031"]


def test_convert_without_atc_exit_1(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """No CANN toolkit: how to get ATC, and that CPU emulation still works; exit 1."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    model = write_one_node(tmp_path / "m.onnx")
    assert main(["convert", str(model), "--soc-version", "Ascend310P3", "-o", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert "source /usr/local/Ascend/ascend-toolkit/set_env.sh" in err and "CPU emulation" in err
    assert not (tmp_path / "m.om").exists()


def test_convert_missing_model_exit_1(
    fake_atc: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model file that is not there: one clear line, exit 1."""
    assert main(["convert", str(tmp_path / "gone.onnx"), "--soc-version", "Ascend310P3", "-o", "x"]) == 1
    assert capsys.readouterr().err == f"ge-console: error: {tmp_path / 'gone.onnx'}: no such file\n"


def test_convert_on_a_terminal_shows_progress(tmp_path: Path) -> None:
    """On a terminal the rich progress display runs (and goes away); the result line still arrives."""
    import pty

    model = write_one_node(tmp_path / "m.onnx")
    env = {**os.environ, "PATH": f"{FAKES}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "120"}
    command = [sys.executable, "-m", "triton_ge_console.cli", "convert", str(model), "--soc-version",
               "Ascend310P3", "-o", str(tmp_path / "m")]  # fmt: skip
    master, slave = pty.openpty()
    with subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env) as process:
        os.close(slave)
        output = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
        assert process.wait(timeout=60) == 0
    os.close(master)
    assert f"wrote {tmp_path / 'm.om'}".encode() in output.replace(b"\r\n", b"\n")
    assert (tmp_path / "m.om").is_file()


def test_convert_unknown_input_name_exit_1(
    fake_atc: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--input-shape naming a tensor the ONNX lacks is caught before ATC runs: E10016, exit 1."""
    model = write_one_node(tmp_path / "m.onnx")
    args = ["convert", str(model), "--soc-version", "Ascend310P3", "-o", str(tmp_path / "m"),
            "--input-shape", "pixels:1,4"]  # fmt: skip
    assert main(args) == 1
    assert capsys.readouterr().err.startswith("ge-console: error: E10016: Op name pixels")
    assert not (tmp_path / "m.om").exists()


def test_convert_finds_the_om_atc_names_for_a_dynamic_shape(fake_atc: None, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """-1 without gears: ATC writes m_<os>_<arch>.om; convert reports that file, exit 0 (it said "atc exited
    0 but wrote no m.om" and exited 1)."""
    model = write_one_node(tmp_path / "m.onnx")
    args = ["convert", str(model), "--soc-version", "Ascend910B3", "-o", str(tmp_path / "m"),
            "--input-shape", "x:-1,4"]  # fmt: skip
    assert main(args) == 0
    written = tmp_path / f"m_linux_{platform.machine()}.om"
    assert capsys.readouterr().out.startswith(f"wrote {written} (")
    assert json.loads((tmp_path / f"{written.name}.atc.json").read_text())["soc_version"] == "Ascend910B3"


def _npu_smi_layout(monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    """The fake npu-smi (on PATH with the fake atc) shows this recorded card; nothing cached from before."""
    from triton_ge_console.repository import soc

    monkeypatch.setenv("NPU_SMI_FAKE_LAYOUT", layout)
    monkeypatch.setattr(soc, "_CACHE", {})


def test_convert_offers_the_soc_of_the_visible_npus(fake_atc: None, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """No --soc-version: "Ascend" + the chip name npu-smi shows; a table that does not tell asks for it."""
    model = write_one_node(tmp_path / "m.onnx")
    _npu_smi_layout(monkeypatch, "910b4")
    assert main(["convert", str(model), "-o", str(tmp_path / "m")]) == 0
    assert "--soc-version Ascend910B4 (this host's NPUs)" in capsys.readouterr().err
    assert main(["convert", str(model), "--soc-version", "Ascend910B", "-o", str(tmp_path / "legacy")]) == 0
    err = capsys.readouterr().err
    assert "Ascend910B is the legacy 910-class SoC, not the 910B series" in err
    assert ("this host's NPUs are Ascend910B4; an OM built for Ascend910B will not load on them (another "
            "NpuArch)") in err
    _npu_smi_layout(monkeypatch, "a3_910")  # A3 shows "Ascend910": the SoC needs the board's NPU name
    assert main(["convert", str(model), "-o", str(tmp_path / "m")]) == 2
    assert capsys.readouterr().err == ("ge-console: error: --soc-version is required (npu-smi names no "
                                       "NPU's SoC here)\n")


def test_validate_says_an_om_built_for_another_soc_will_not_load(
        fake_atc: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An OM convert built for Ascend310P3 (the SoC in the OM's model, as ATC writes it), on a host with
    910B4 NPUs: an error before load (another NpuArch); one built for Ascend910B3 there: a warning
    (AscendCL loads it)."""
    from triton_ge_console.repository.validate import validate_path

    folder = tmp_path / "repo" / "m"
    (folder / "1").mkdir(parents=True)
    model = write_one_node(folder / "1" / "model.onnx")
    param = 'parameters { key: "om_model_path" value { string_value: "model.om" } }\n'
    (folder / "config.pbtxt").write_text('name: "m"\nbackend: "ge"\n' + param, encoding="utf-8")
    args = ["convert", str(model), "--soc-version", "Ascend310P3", "-o", str(folder / "1" / "model")]
    assert main(args) == 0
    _npu_smi_layout(monkeypatch, "910b4")
    (problem,) = validate_path(folder).problems
    assert problem.severity == "error"
    assert "model.om was built for Ascend310P3 (its soc_version attribute), but this host's NPUs are " \
           "Ascend910B4: another NpuArch, so AscendCL refuses it at load (ACL error 500002" in str(problem)
    _npu_smi_layout(monkeypatch, "310p3_duo")
    assert validate_path(folder).problems == ()
    # the same NpuArch (DAV_2201): an OM for Ascend910B3 loads on a 910B4, only the name differs
    args[args.index("Ascend310P3")] = "Ascend910B3"
    assert main(args) == 0
    _npu_smi_layout(monkeypatch, "910b4")
    (same,) = validate_path(folder).problems
    assert same.severity == "warning" and "the same NpuArch (DAV_2201), so AscendCL loads it" in same.message


def test_validate_judges_an_om_without_a_record_by_its_own_soc_attribute(
        fake_atc: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An OM ATC wrote without convert (no .atc.json) carries soc_version in its model (GE's
    CheckModelCompatibility reads it at load): built for Ascend310P3, on 910B4 NPUs, an error; for
    Ascend910B3 there, a warning; where both are there, the OM's own attribute is what is judged, and a
    record that names another SoC is said to be stale."""
    from tests.fakes import om_layout
    from triton_ge_console.repository.validate import validate_path

    folder = tmp_path / "repo" / "m"
    (folder / "1").mkdir(parents=True)
    write_one_node(folder / "1" / "model.onnx")
    param = 'parameters { key: "om_model_path" value { string_value: "model.om" } }\n'
    (folder / "config.pbtxt").write_text('name: "m"\nbackend: "ge"\n' + param, encoding="utf-8")
    om = om_layout.write_om(folder / "1" / "model.om", "Ascend310P3", b"{}")
    _npu_smi_layout(monkeypatch, "910b4")
    (problem,) = validate_path(folder).problems
    assert problem.severity == "error"
    assert ("model.om was built for Ascend310P3 (its soc_version attribute), but this host's NPUs are "
            "Ascend910B4: another NpuArch, so AscendCL refuses it at load") in problem.message
    om_layout.write_om(om, "Ascend910B3", b"{}")
    (same,) = validate_path(folder).problems
    assert same.severity == "warning" and "built for Ascend910B3 (its soc_version attribute)" in same.message
    (folder / "1" / "model.om.atc.json").write_text(json.dumps({"soc_version": "Ascend310P3"}))
    kept, stale = validate_path(folder).problems  # the SoC's verdict, then the record's
    assert kept.severity == "warning" and "built for Ascend910B3 (its soc_version attribute)" in kept.message
    assert stale.severity == "warning" and stale.message.endswith(
        "model.om.atc.json says model.om was built for Ascend310P3, but the OM's own soc_version attribute "
        "is Ascend910B3 (what GE checks at load): the OM was built again without convert, so the record's "
        "ATC command is not this OM's; convert it again or delete the record")
    # an OM this cannot read (encrypted): convert's record stands in, and the verdict names it
    om.write_bytes(om_layout.om_bytes([(om_layout.MODEL_DEF, b"ciphertext")], is_encrypt=1))
    (recorded,) = validate_path(folder).problems
    assert recorded.severity == "error" and "built for Ascend310P3 (model.om.atc.json)" in recorded.message


def test_validate_refuses_an_om_recorded_with_more_gears_than_ascendcl_reads(tmp_path: Path) -> None:
    """An OM whose recorded ATC command (convert's .atc.json, from before convert checked this) has 129
    batch gears: AscendCL's aclmdlGetDynamicBatch refuses it at load, so validate says so (passed before)."""
    from triton_ge_console.repository.validate import validate_path

    folder = tmp_path / "repo" / "m"
    (folder / "1").mkdir(parents=True)
    write_one_node(folder / "1" / "model.onnx")
    (folder / "1" / "model.om").write_bytes(b"an OM")
    gears = ",".join(str(g) for g in range(1, 130))
    command = ["atc", "--model=model.onnx", "--framework=5", "--output=model", "--soc_version=Ascend910B3",
               "--input_shape=x:-1,4", f"--dynamic_batch_size={gears}"]
    record = {"soc_version": "Ascend910B3", "atc": command}
    (folder / "1" / "model.om.atc.json").write_text(json.dumps(record))
    param = 'parameters { key: "om_model_path" value { string_value: "model.om" } }\n'
    (folder / "config.pbtxt").write_text('name: "m"\nbackend: "ge"\n' + param, encoding="utf-8")
    problems = [p for p in validate_path(folder).problems if "AscendCL refuses" in p.message]
    assert [p.severity for p in problems] == ["error"]
    assert "model.om (model.om.atc.json): --dynamic_batch_size: ATC builds it, but AscendCL refuses the OM " \
           "at load: aclmdlGetDynamicBatch: batch count[129] is larger than max batch num[128]" \
        in problems[0].message


def test_validate_backend_dir_finds_backends(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--backend-dir: a backend with a library or a Python-based backend there passes; one with neither is
    Triton's refusal (exit 1); a library in the model folder counts, as Triton looks there too."""
    backends = tmp_path / "backends"
    (backends / "pyb").mkdir(parents=True)
    (backends / "pyb" / "model.py").write_text("# a Python-based backend\n", encoding="utf-8")
    (backends / "cpp").mkdir()
    (backends / "cpp" / "libtriton_cpp.so").write_bytes(b"")
    repository = tmp_path / "repo"
    for backend in ("pyb", "cpp", "local", "gone"):
        _model(repository, backend, GOOD.replace('"m"', f'"{backend}"').replace('"python"', f'"{backend}"'))
    (repository / "local" / "libtriton_local.so").write_bytes(b"")
    assert main(["validate", str(repository), "--backend-dir", str(backends)]) == 1
    lines = capsys.readouterr().out.splitlines()  # findings only: the verdict goes to stderr
    assert lines == [
        f"{repository}/gone/config.pbtxt:2:1 backend: unable to find backend library for backend 'gone', "
        "try specifying runtime on the model configuration."
    ]


def test_validate_with_a_sessions_backend_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--session NAME judges backends against the directory that session's Triton uses; an unknown session
    is a usage error with one line."""
    from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
    from triton_ge_console.sessions.server.registry import Registry, SessionRecord

    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    backends = tmp_path / "backends"
    (backends / "pyb").mkdir(parents=True)
    (backends / "pyb" / "model.py").write_text("# a Python-based backend\n", encoding="utf-8")
    Registry().save(SessionRecord(
        name="prod", pid=None, started_at=0.0, http_url="http://127.0.0.1:1", grpc_url=None, metrics_url=None,
        repository=None, spec=None, backend_dir=backends, log_path=None, token_ref=None, attached=False,
        session_dir=None))  # fmt: skip
    repository = tmp_path / "repo"
    for backend in ("pyb", "gone"):
        _model(repository, backend, GOOD.replace('"m"', f'"{backend}"').replace('"python"', f'"{backend}"'))
    assert main(["validate", str(repository), "--session", "prod"]) == 1
    out = capsys.readouterr().out
    assert "backend: unable to find backend library for backend 'gone'" in out and "'pyb'" not in out
    assert main(["validate", str(repository), "--session", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ge-console: error:") and "nope" in err and err.count("\n") == 1
