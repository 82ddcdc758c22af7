"""A spec's server.backend_config.npu_ge.device_ids place the npu_ge models that name no NPUs, as native
npu_ge reads its command line first and a model's device_ids over it (hicann's
triton-inference-server-ge-backend, src/model_state.cpp: DisposeConfig, then ParseModelParametersConfig,
whose ParseParameterValue replaces the list). The build wrote device_ids "0" into every npu_ge model, which
on native npu_ge replaced the command line's NPUs, so the spec's value never took effect."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.repository.spec_helpers import refused
from triton_ge_console.repository.configgen import config_parameters
from triton_ge_console.repository.spec.load import load_spec

SPEC = """
    server:
      backend_config:
        npu_ge: {device_ids: "6,7"}
    models:
      - {name: from_cmdline, backend: npu_ge, source: "demo:bert"}
      - {name: own_ids, backend: npu_ge, source: "demo:bert", instance_group: {device_ids: [3]}}
      - {name: own_zero, backend: npu_ge, source: "demo:bert", instance_group: {device_ids: [0]}}
      - {name: glue, backend: ge, source: "demo:bert"}
    """


def _spec(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "deploy.yaml"
    path.write_text("name: lab\n" + textwrap.dedent(body).lstrip("\n"), encoding="utf-8")
    return path


def test_command_line_device_ids_place_npu_ge_models_naming_none(tmp_path: Path) -> None:
    """An npu_ge model naming no NPUs runs on the command line's (its config says so); one naming its
    own keeps them, even NPU 0; a ge model does not read npu_ge's command line."""
    models = {m.name: m for m in load_spec(_spec(tmp_path, SPEC)).models}
    assert models["from_cmdline"].instance_group.device_ids == (6, 7)
    assert config_parameters(models["from_cmdline"])["device_ids"] == "6,7"
    assert models["own_ids"].instance_group.device_ids == (3,)
    assert models["own_zero"].instance_group.device_ids == (0,)
    assert models["glue"].instance_group.device_ids == (0,)


def test_command_line_device_ids_npu_ge_cannot_read_are_refused(tmp_path: Path) -> None:
    """npu_ge reads each id with std::stoi (ProcessDeviceIdsConfig): a load failure there, refused here."""
    (problem,) = refused(_spec(tmp_path, """
        server: {backend_config: {npu_ge: {device_ids: "6,x"}}}
        models:
          - {name: m, backend: npu_ge, source: "demo:bert"}
        """))
    assert "server.backend_config.npu_ge.device_ids" in problem and "std::stoi" in problem
