"""npu_ge's values given only through `server.backend_config.npu_ge` (`--backend-config=npu_ge,KEY=VALUE`)
reach the npu_ge emulation as native npu_ge reads them (hicann's triton-inference-server-ge-backend,
src/model_state.cpp, ModelState::ModelState): the command line first (ParseCmdlineConfig, DisposeConfig),
then the model's parameters over it (ParseModelParametersConfig; its device_ids replace the command line's,
ParseParameterValue clears the list first)."""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.backend_glue.conftest import server_env
from tests.backend_glue.metrics import metric_samples
from tests.conftest import RunningServer, run_triton
from tests.models import dense_model, param, write_model
from tests.sessions.conftest import stopping_sessions
from tests.waiting import wait_until
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.backend_glue.settings import GlueConfigError, npu_ge_command_line, npu_ge_placement
from triton_ge_console.sessions.launcher import LaunchOptions, launch
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry

NPU_GE = 'backend: "npu_ge"\nmax_batch_size: 8\n'
SPEC = """\
name: npugecmdline
server:
  backend_config:
    npu_ge: {device_ids: "6,7"}
models:
  - {name: from_cmdline, backend: npu_ge, source: "demo:bert", max_batch_size: 4}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory,
           triton_dist: TritonDistribution) -> Iterator[RunningServer]:
    """Two CPU-emulated npu_ge models under --backend-config=npu_ge,device_ids=6,7: one naming no NPU, one
    its own device_ids."""
    root = tmp_path_factory.mktemp("npu_ge_cmdline")
    install_backend_dir(root / "backends", triton_dist)
    repo = root / "repo"
    write_model(repo, "from_cmdline", NPU_GE, dense_model(seed=3), onnx_name="net.onnx")
    write_model(repo, "own_ids", NPU_GE + param("device_ids", "3"), dense_model(seed=4), onnx_name="net.onnx")
    source = str(Path(__file__).resolve().parents[2] / "src")  # this checkout's package
    saved = os.environ.pop("ASCEND_RT_VISIBLE_DEVICES", None)  # no NPU list but the command line's
    try:
        with (server_env(PYTHONPATH=source, GE_GLUE_RUN_DIR=str(root / "run")),
              run_triton(triton_dist, repo, root / "backends", models=("from_cmdline", "own_ids"),
                         extra=("--backend-config=npu_ge,device_ids=6,7",)) as running):
            yield running
    finally:
        if saved is not None:
            os.environ["ASCEND_RT_VISIBLE_DEVICES"] = saved


def _model_devices(server: RunningServer, model: str) -> set[str]:
    """The NPUs the glue charges a model's memory on (ge_model_memory_bytes, label device)."""
    return _charged(metric_samples(server, "ge_model_memory_bytes"), model)


def _charged(samples: list[Sample], model: str) -> set[str]:
    """The devices of a model's ge_model_memory_bytes samples above zero."""
    return {s.labels["device"] for s in samples if s.labels.get("model") == model and s.value > 0}


@pytest.mark.server
def test_a_spec_naming_npus_only_in_backend_config_serves_its_npu_ge_model_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`up` of a spec whose npu_ge model names no NPUs and whose server.backend_config.npu_ge names 6,7:
    the emulated model is charged on 6 and 7 (the build wrote device_ids 0 into its config, which on native
    npu_ge replaces the command line's list, so it ran on NPU 0)."""
    spec = tmp_path / "deploy.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    monkeypatch.delenv("ASCEND_RT_VISIBLE_DEVICES", raising=False)
    with stopping_sessions(Registry()) as registry:
        record = launch(LaunchOptions(source=spec, timeout=240, exit_timeout_s=2), registry)
        assert record.metrics_url is not None
        url = record.metrics_url

        def charged() -> set[str]:
            with urllib.request.urlopen(url, timeout=5) as response:
                text = response.read().decode()
            samples = [s for family in text_string_to_metric_families(text) for s in family.samples
                       if s.name == "ge_model_memory_bytes"]
            return _charged(samples, "from_cmdline")

        assert wait_until(lambda: charged() == {"6", "7"}, timeout=20)


@pytest.mark.server
def test_device_ids_only_on_the_command_line_place_the_model_on_those_npus(server: RunningServer) -> None:
    """device_ids given only as --backend-config=npu_ge,device_ids=6,7 (a spec's server.backend_config)
    put the model on NPUs 6 and 7 (the emulation charged one NPU and called the count unknown); a model
    naming its own device_ids runs on those alone, as native npu_ge's model parameters replace the list."""
    assert wait_until(lambda: _model_devices(server, "from_cmdline") == {"6", "7"}, timeout=20)
    assert _model_devices(server, "own_ids") == {"3"}
    assert "device=6,7 " in server.log() and "names no device_ids" not in server.log()


def test_the_command_line_comes_first_and_the_models_parameters_over_it() -> None:
    """As model_state.cpp: block counts from the model replace the command line's, static_model from the
    command line counts for the string "1" alone, and a bad command-line count fails the load."""
    bare = {"parameters": {}}
    own = {"parameters": {"device_exec_blocks": {"string_value": "3"}, "device_ids": {"string_value": "1"}}}
    cmdline = {"device_ids": "4,5", "device_exec_blocks": "2"}
    assert npu_ge_placement(bare, cmdline, 1, 0, "m") == ((4, 5), 2)
    assert npu_ge_placement(own, cmdline, 1, 0, "m") == ((1,), 3)
    # static: the GE sessions share the first, one copy per NPU; "01" is not "1" on the command line
    blocks = {"device_ids": "0", "device_exec_blocks": "4"}
    assert npu_ge_placement(bare, {**blocks, "static_model": "1"}, 1, 0, "m") == ((0,), 1)
    assert npu_ge_placement(bare, {**blocks, "static_model": "01"}, 1, 0, "m") == ((0,), 4)
    with pytest.raises(GlueConfigError, match=r"--backend-config=npu_ge,device_exec_blocks=0"):
        npu_ge_placement(bare, {"device_exec_blocks": "0"}, 1, 0, "m")


def test_npu_ge_naming_an_npu_twice_is_refused_not_merged() -> None:
    """npu_ge keeps device_ids as written and sets up each entry, a repeated NPU once per mention
    (model_state.cpp ParseParameterValue, model_instance_state.cpp InitializeDeviceThreads): the emulation
    refuses it, as spec and validate do, rather than merging the repeats."""
    twice = {"parameters": {"device_ids": {"string_value": "1,1"}}}
    with pytest.raises(GlueConfigError, match=r"m: parameter device_ids '1,1': NPU 1 is named 2 times"):
        npu_ge_placement(twice, {}, 1, 0, "m")
    with pytest.raises(GlueConfigError, match=r"--backend-config=npu_ge,device_ids=4,4 '4,4': NPU 4"):
        npu_ge_placement({"parameters": {}}, {"device_ids": "4,4"}, 1, 0, "m")


def test_npu_ge_values_are_read_from_the_servers_command_line_as_triton_splits_them() -> None:
    """Triton splits --backend-config at the first comma, then the first '=' (so device_ids keep their
    commas); other backends' values and keys npu_ge does not read as its own (ge.* go to GE) stay out."""
    argv = ["tritonserver", "--backend-config=npu_ge,device_ids=4,5", "--backend-config",
            "npu_ge,profiling=x",
            "--backend-config=python,device_ids=9", "--backend-config=npu_ge,ge.exec.precision_mode=fp16",
            "--model-repository=/m"]
    assert npu_ge_command_line(argv) == {"device_ids": "4,5", "profiling": "x"}

