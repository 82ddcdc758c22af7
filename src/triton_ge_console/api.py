"""The Python API: what a notebook or a script needs, in one import (as nvitop's `api`).

    from triton_ge_console.api import Registry, launch, LaunchOptions, controller_for, token_headers, down

Everything else in the package is internal and may move; these names stay. The live views are
`triton_ge_console.widgets` (`Dashboard`, ...). docs/reference/api.md lists each name with its docstring.
"""

from __future__ import annotations

from pathlib import Path

from triton_ge_console.backend_glue.generate_text import TextCodec
from triton_ge_console.backend_glue.installer import NATIVE_NPU_GE
from triton_ge_console.repository import atc, pbtxt
from triton_ge_console.repository.build import BuildReport, build_repository
from triton_ge_console.repository.configgen import model_config
from triton_ge_console.repository.demo_decoder import DEMO_LAYOUT, direct_greedy
from triton_ge_console.repository.demo_models import demo_bytes
from triton_ge_console.repository.spec.load import SpecError, load_spec, parse_spec
from triton_ge_console.repository.spec.types import (
    DeploymentSpec,
    DynamicBatchingSpec,
    InstanceGroupSpec,
    ModelSpec,
)
from triton_ge_console.repository.starter import STARTER_SPEC
from triton_ge_console.repository.validate import validate_config_text, validate_path
from triton_ge_console.sessions.act.control import ControlError, SessionControl, controller_for
from triton_ge_console.sessions.launcher import LaunchError, LaunchOptions, launch
from triton_ge_console.sessions.lifecycle import SessionStatus, StopResult, down, session_status
from triton_ge_console.sessions.live import LiveSource
from triton_ge_console.sessions.loadgen import vs_direct_report
from triton_ge_console.sessions.loadgen.run import LoadRun, LoadSpec
from triton_ge_console.sessions.loadgen.vs_direct import VsDirectSpec, measure_vs_direct_sync
from triton_ge_console.sessions.observe.snapshot import ModelSnapshot, ServerSnapshot
from triton_ge_console.sessions.server.access import token_headers
from triton_ge_console.sessions.server.registry import Registry, SessionRecord

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed.yaml"  # in a checkout


def seed_spec(folder: Path) -> Path:
    """The seed deployment spec: examples/seed.yaml in a checkout, else the same starter spec (what
    `ge-console init` writes) written into folder, so a notebook runs from an installed package too."""
    if SEED.is_file():
        return SEED
    path = Path(folder) / "seed.yaml"
    path.write_text(STARTER_SPEC, encoding="utf-8")
    return path


__all__ = [
    "DEMO_LAYOUT",
    "NATIVE_NPU_GE",
    "STARTER_SPEC",
    "BuildReport",
    "ControlError",
    "DeploymentSpec",
    "DynamicBatchingSpec",
    "InstanceGroupSpec",
    "LaunchError",
    "LaunchOptions",
    "LiveSource",
    "LoadRun",
    "LoadSpec",
    "ModelSnapshot",
    "ModelSpec",
    "Registry",
    "ServerSnapshot",
    "SessionControl",
    "SessionRecord",
    "SessionStatus",
    "SpecError",
    "StopResult",
    "TextCodec",
    "VsDirectSpec",
    "atc",
    "build_repository",
    "controller_for",
    "demo_bytes",
    "direct_greedy",
    "down",
    "launch",
    "load_spec",
    "measure_vs_direct_sync",
    "model_config",
    "parse_spec",
    "pbtxt",
    "seed_spec",
    "session_status",
    "token_headers",
    "validate_config_text",
    "validate_path",
    "vs_direct_report",
]
