"""The installer lays out a backend dir tritonserver really runs, idempotently, with glue or native npu_ge."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from tests.backend_glue.conftest import server_env
from tests.conftest import run_triton
from tests.models import DENSE_CONFIG, dense_model, write_model
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import GLUE_MODEL_PY, install_backend_dir
from triton_ge_console.cli import main

EXPECTED = ("python/libtriton_python.so", "python/triton_python_backend_utils.py",
            "python/triton_python_backend_stub", "ge/model.py", "npu_ge/model.py")


def _mtimes(root: Path) -> dict[str, int]:
    """Every file's mtime under root."""
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def test_lays_out_python_backend_and_glue_then_changes_nothing(tmp_path: Path,
                                                               triton_dist: TritonDistribution) -> None:
    dest = tmp_path / "backends"
    report = install_backend_dir(dest, triton_dist)
    assert [str(f.path.relative_to(dest)) for f in report.files] == list(EXPECTED)
    assert {f.action for f in report.files} == {"added"}
    assert os.access(dest / "python" / "triton_python_backend_stub", os.X_OK)
    assert (dest / "ge" / "model.py").read_bytes() == GLUE_MODEL_PY.read_bytes()
    before = _mtimes(dest)
    again = install_backend_dir(dest, triton_dist)
    assert not again.changed and _mtimes(dest) == before


def test_refreshes_a_stale_file(tmp_path: Path, triton_dist: TritonDistribution) -> None:
    dest = tmp_path / "backends"
    install_backend_dir(dest, triton_dist)
    (dest / "ge" / "model.py").write_text("# stale\n")
    report = install_backend_dir(dest, triton_dist)
    assert [f.action for f in report.files if f.action != "unchanged"] == ["updated"]
    assert (dest / "ge" / "model.py").read_bytes() == GLUE_MODEL_PY.read_bytes()


def test_native_npu_ge_is_linked_instead_of_the_glue_and_back(tmp_path: Path,
                                                               triton_dist: TritonDistribution) -> None:
    native = tmp_path / "cann" / "npu_ge"
    native.mkdir(parents=True)
    (native / "libnpu_ge.so").write_bytes(b"\x7fELF stand-in")
    dest = tmp_path / "backends"
    install_backend_dir(dest, triton_dist)
    report = install_backend_dir(dest, triton_dist, native_npu_ge=native / "libnpu_ge.so")
    assert report.npu_ge == f"native {native}"
    assert (dest / "npu_ge").is_symlink() and (dest / "npu_ge" / "libnpu_ge.so").is_file()
    assert not install_backend_dir(dest, triton_dist, native_npu_ge=native).changed
    install_backend_dir(dest, triton_dist)
    assert not (dest / "npu_ge").is_symlink() and (dest / "npu_ge" / "model.py").is_file()


def test_cli_prints_what_it_used_and_fails_cleanly(tmp_path: Path, capsys: object) -> None:
    assert main(["backend", "install", str(tmp_path / "b")]) == 0
    out = capsys.readouterr()  # type: ignore[attr-defined]
    assert "python backend stub:" in out.out and "npu_ge: glue" in out.out
    assert main(["backend", "install", str(tmp_path / "b"), "--native-npu-ge", str(tmp_path / "none")]) == 1
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert err.count("\n") == 1 and "no libnpu_ge.so" in err


TOY_BACKEND = textwrap.dedent('''
    import triton_python_backend_utils as pb_utils
    import triton_ge_console  # the stub must embed our interpreter and see the editable install


    class TritonPythonModel:
        def execute(self, requests):
            return [pb_utils.InferenceResponse([pb_utils.Tensor(
                "Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() + 1)]) for r in requests]
''')

TOY_CONFIG = textwrap.dedent('''
    backend: "toy"
    max_batch_size: 4
    input [{ name: "X" data_type: TYPE_FP32 dims: [2] }]
    output [{ name: "Y" data_type: TYPE_FP32 dims: [2] }]
''')


def test_tritonserver_runs_a_python_based_backend_from_the_installed_dir(
        tmp_path: Path, triton_dist: TritonDistribution) -> None:
    dest = tmp_path / "backends"
    install_backend_dir(dest, triton_dist)
    (dest / "toy").mkdir()
    (dest / "toy" / "model.py").write_text(TOY_BACKEND)
    (tmp_path / "repo" / "toy" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "toy" / "config.pbtxt").write_text(TOY_CONFIG)
    write_model(tmp_path / "repo", "glued", DENSE_CONFIG.format(backend="ge", extra=""), dense_model())
    with (server_env(GE_GLUE_RUN_DIR=str(tmp_path / "run")),
          run_triton(triton_dist, tmp_path / "repo", dest, models=("toy", "glued")) as server,
          httpclient.InferenceServerClient(server.http_hostport) as client):
        assert client.is_model_ready("toy"), server.log()
        x = httpclient.InferInput("X", [1, 2], "FP32")
        x.set_data_from_numpy(np.array([[1.0, 2.0]], dtype=np.float32))
        assert client.infer("toy", [x]).as_numpy("Y").tolist() == [[2.0, 3.0]]
    # the server's log is complete once it has stopped: the glue logged its mode at load
    assert (f"ge glue: model glued instance glued_0 execution_mode=cpu-emulated (requested auto) device=0 "
            f"memory=539 bytes source={tmp_path / 'repo' / 'glued' / '1' / 'model.onnx'}") in server.log()


def test_server_environment_puts_this_python_first_and_keeps_the_operators_allocator_choice(
        triton_dist: TritonDistribution) -> None:
    import sys
    import sysconfig

    env = triton_dist.environment({"PATH": "/usr/bin", "MALLOC_TRIM_THRESHOLD_": "1234"})
    assert env["LD_LIBRARY_PATH"].split(":")[0] == sysconfig.get_config_var("LIBDIR")
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    assert env["MALLOC_MMAP_THRESHOLD_"] == str(32 << 20)  # response buffers come from the heap
    assert env["MALLOC_TRIM_THRESHOLD_"] == "1234"  # what the operator set wins
    plain = triton_dist.environment({"PATH": "/usr/bin", "GE_CONSOLE_ALLOCATOR": "glibc"})
    assert "MALLOC_MMAP_THRESHOLD_" not in plain and "MALLOC_TRIM_THRESHOLD_" not in plain
