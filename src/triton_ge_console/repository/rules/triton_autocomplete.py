"""Triton asks a Python-based backend's `TritonPythonModel.auto_complete_config` to complete a model's config
when it loads the model, then merges what comes back (backend_model.cc UpdateModelConfig) and judges the
result. Here the same function runs offline, the way the stub runs it: in a subprocess, with the real
triton_python_backend_utils of the installed Triton distribution, a time limit and no network."""

from __future__ import annotations

import ast
import copy
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_ge_console.ge_backends import GE_BACKENDS
from triton_ge_console.repository import autocomplete_runner as runner
from triton_ge_console.repository.rules.findings import Finding, error, warning

TIME_LIMIT_S = 30.0
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # holds triton_ge_console, for the glue's model.py
SCHEDULERS = ("dynamic_batching", "sequence_batching", "ensemble_scheduling")


@dataclass(frozen=True)
class Completion:
    """What auto-complete gave: the merged config (the written one when it did not run) and any finding."""

    config: mc.ModelConfig
    findings: tuple[Finding, ...] = ()


def model_code(config: mc.ModelConfig, version_dir: Path, backend_dirs: tuple[Path, ...]) -> Path | None:
    """The Python file the stub loads: the version's model.py for `python`, else a Python-based backend's."""
    if config.backend == "python":
        return version_dir / (config.runtime or "model.py")
    for directory in backend_dirs:
        if (directory / config.backend / "model.py").is_file():
            return directory / config.backend / "model.py"
    if config.backend in GE_BACKENDS:
        from triton_ge_console.backend_glue.installer import GLUE_MODEL_PY

        return GLUE_MODEL_PY
    return None


def defines_auto_complete(code: Path) -> bool:
    """Whether TritonPythonModel has auto_complete_config (without it the stub returns the config as is)."""
    try:
        tree = ast.parse(code.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "TritonPythonModel":
            return any(
                isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                and item.name == "auto_complete_config"
                for item in node.body
            )
    return False


def complete(config: mc.ModelConfig, version_dir: Path, backend_dirs: tuple[Path, ...] = ()) -> Completion:
    """Run the model's auto_complete_config on config and merge the answer as Triton does."""
    code = model_code(config, version_dir, backend_dirs)
    if code is None or not code.is_file():
        return Completion(config)
    if config.backend in GE_BACKENDS and config.input and config.output:
        return Completion(config)  # the glue fills only a config that leaves inputs or outputs out
    if config.backend not in GE_BACKENDS and not defines_auto_complete(code):
        return Completion(config)
    utils_dir = _python_backend_dir()
    if utils_dir is None:
        message = "auto_complete_config was not run: no Triton Python backend (triton_python_backend_utils.py"
        return Completion(config, (warning("backend", message + ") found"),))
    key = _inputs_key(code, version_dir)
    outcome = _answer(config_json(config), config.name, code, version_dir, utils_dir, key)
    if "error" in outcome:
        return Completion(config, (error("backend", str(outcome["error"])),))
    outcome = copy.deepcopy(outcome)  # cached: the merge must not change it
    return _merge(config, outcome["config"])


def _python_backend_dir() -> Path | None:
    """The installed Triton distribution's Python backend folder (its triton_python_backend_utils.py)."""
    from triton_ge_console.backend_glue.distribution import DistributionError, find_distribution

    try:
        folder = find_distribution().python_backend_dir
    except DistributionError:
        return None
    return folder if folder is not None and (folder / "triton_python_backend_utils.py").is_file() else None


def config_json(config: mc.ModelConfig) -> str:
    """The config as Triton hands it to the stub: every field with its default, int64 dims as numbers."""
    as_dict = json_format.MessageToDict(
        config, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    for io in [*as_dict.get("input", []), *as_dict.get("output", [])]:
        io["dims"] = [int(d) for d in io.get("dims", [])]
    return json.dumps(as_dict)


def _inputs_key(code: Path, version_dir: Path) -> tuple[tuple[str, int, int], ...]:
    """What the answer can depend on besides the config: the code and the version folder's files."""
    version_files = sorted(p for p in version_dir.iterdir() if p.is_file()) if version_dir.is_dir() else []
    files = [code, *version_files]
    return tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)


@functools.lru_cache(maxsize=256)
def _answer(
    config_text: str,
    name: str,
    code: Path,
    version_dir: Path,
    utils_dir: Path,
    _key: tuple[tuple[str, int, int], ...],
) -> dict[str, Any]:
    """The stub's work in a subprocess, once per config and state of the files (a time limit ends it)."""
    with tempfile.TemporaryDirectory(prefix="ge-autocomplete-") as work:
        shutil.copy(Path(runner.__file__), Path(work) / "sitecustomize.py")
        result = Path(work) / "result.json"
        env = dict(os.environ)
        paths = [work, str(utils_dir), str(PACKAGE_ROOT), env.get("PYTHONPATH", "")]
        env.update(
            {
                "PYTHONPATH": os.pathsep.join(p for p in paths if p),
                runner.CODE_ENV: str(code),
                runner.CONFIG_ENV: config_text,
                runner.RESULT_ENV: str(result),
                runner.NAME_ENV: name,
            }
        )
        argv = [sys.executable, str(version_dir / "model.py")]  # argv[1] as the stub's
        try:
            subprocess.run(argv, env=env, cwd=work, capture_output=True, timeout=TIME_LIMIT_S, check=False)
        except subprocess.TimeoutExpired:
            return {"error": f"auto_complete_config of model '{name}' did not return within "
                             f"{TIME_LIMIT_S:g} s (stopped)"}  # fmt: skip
        if not result.is_file():
            return {"error": f"auto_complete_config of model '{name}' ended without an answer"}
        return dict(json.loads(result.read_text(encoding="utf-8")))


def _merge(config: mc.ModelConfig, answer: dict[str, Any]) -> Completion:
    """UpdateModelConfig: batch size, inputs, outputs, a scheduler where none was set, decoupled."""
    updated = mc.ModelConfig()
    try:
        json_format.ParseDict(answer, updated, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        return Completion(config, (error("backend", f"Failed to parse auto-complete JSON. ({exc})"),))
    merged = mc.ModelConfig()
    merged.CopyFrom(config)
    merged.max_batch_size = updated.max_batch_size
    del merged.input[:]
    merged.input.extend(updated.input)
    del merged.output[:]
    merged.output.extend(updated.output)
    choice, new_choice = config.WhichOneof("scheduling_choice"), updated.WhichOneof("scheduling_choice")
    if choice is None and new_choice is not None:
        getattr(merged, new_choice).CopyFrom(getattr(updated, new_choice))
    elif choice is not None and new_choice is not None and choice != new_choice:
        number = mc.ModelConfig.DESCRIPTOR.fields_by_name[choice].number
        message = f"Cannot update scheduling choice from {number} to {number} when auto-completing."
        return Completion(config, (error(choice, message),))
    if updated.HasField("model_transaction_policy"):
        merged.model_transaction_policy.decoupled = updated.model_transaction_policy.decoupled
    return Completion(merged)
