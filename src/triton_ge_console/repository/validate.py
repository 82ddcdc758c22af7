"""Judge a model repository, one model folder or one config.pbtxt the way Triton would when loading it, and
report every problem with file, line and field, before any server is started."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf.descriptor import Descriptor
from tritonclient.grpc import model_config_pb2 as mc

from triton_ge_console.display import printable
from triton_ge_console.errors import PathError
from triton_ge_console.npu_smi import host_npu_count
from triton_ge_console.repository import pbtxt
from triton_ge_console.repository.pbtxt import excerpted
from triton_ge_console.repository.rules import ge as ge_rules
from triton_ge_console.repository.rules import ge_devices as ge_rules_devices
from triton_ge_console.repository.rules import triton as triton_rules
from triton_ge_console.repository.rules import triton_autocomplete as triton_rules_autocomplete
from triton_ge_console.repository.rules import triton_backends as triton_rules_backends
from triton_ge_console.repository.rules import triton_json
from triton_ge_console.repository.rules import triton_repository as triton_rules_repository
from triton_ge_console.repository.rules import triton_state as triton_rules_state
from triton_ge_console.repository.rules import triton_warmup as triton_rules_warmup
from triton_ge_console.repository.rules.findings import (
    ENSEMBLE_PLATFORM,
    ERROR,
    WARNING,
    Finding,
    error,
    warning,
)
from triton_ge_console.repository.rules.triton_backends import BackendSearch, backend_search
from triton_ge_console.repository.spec.types import InstanceGroupSpec

CONFIG_NAME = "config.pbtxt"
MAX_CONFIG_BYTES = 8 << 20  # a model config is kilobytes; reading more than this is not validating one
# Fields whose errors Triton reports when loading a model (backend model creation), not when polling it.
LOAD_TIME_FIELDS = (
    "input", "output", "batch_input", "batch_output", "instance_group", "parameters", "model_warmup",
    "sequence_batching.state",
)  # fmt: skip
NO_CONFIG = (
    f"no {CONFIG_NAME}: Triton can only auto-complete a config for backends that read it from the model "
    "file; GE backends need one"
)
# A version folder's file name → the backend Triton infers from it (AutoCompleteBackendFields).
FILE_BACKENDS = {
    "model.plan": "tensorrt",
    "model.onnx": "onnxruntime",
    "model.py": "python",
    "model.pt": "pytorch",
    "model.savedmodel": "tensorflow",
    "model.graphdef": "tensorflow",
}


@dataclass(frozen=True)
class Problem:
    """One thing wrong (error) or doubtful (warning), where it is written."""

    severity: str  # "error" | "warning"
    file: str
    line: int | None
    column: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = ":".join(str(part) for part in (self.file, self.line, self.column) if part is not None)
        label = f" {self.field}:" if self.field else ":"
        severity = " warning:" if self.severity == WARNING else ""
        return printable(f"{where}{label}{severity} {self.message}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return {
            "severity": self.severity,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "field": self.field,
            "message": self.message,
        }


@dataclass(frozen=True)
class ValidationReport:
    """Every problem found under one path; ok when none is an error."""

    path: str
    problems: tuple[Problem, ...]
    models: tuple[str, ...] = ()  # the model folders judged, by name

    @property
    def ok(self) -> bool:
        """No errors (warnings allowed)."""
        return not self.errors

    @property
    def errors(self) -> tuple[Problem, ...]:
        """Problems of severity error."""
        return tuple(p for p in self.problems if p.severity == ERROR)

    @property
    def warnings(self) -> tuple[Problem, ...]:
        """Problems of severity warning."""
        return tuple(p for p in self.problems if p.severity == WARNING)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return {
            "path": self.path,
            "ok": self.ok,
            "models": list(self.models),
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "problems": [p.to_dict() for p in self.problems],
        }


def validate_path(path: Path, backend_dirs: Sequence[Path] = ()) -> ValidationReport:
    """Judge a repository folder, one model folder (holding config.pbtxt) or one config file (config alone);
    backends are looked for in backend_dirs (else /opt/tritonserver/backends where it exists).

    Raises a PathError (an OSError) naming path when it does not exist."""
    if not path.exists():
        raise PathError(f"{path}: no such file or directory")
    search = backend_search(backend_dirs)
    if path.is_file():
        return _read_and_validate(path, None, str(path), search)
    if (path / CONFIG_NAME).is_file():
        return _read_and_validate(path / CONFIG_NAME, path, str(path), search)
    return _validate_repository(path, search)


def validate_config_text(
    text: str,
    path: str,
    model_dir: Path | None = None,
    backend_dirs: Sequence[Path] = (),
    auto_complete: bool = True,
) -> ValidationReport:
    """Judge config.pbtxt text; with model_dir, also its folder (name, versions, model files). Without
    auto_complete the model's auto_complete_config is not run (a subprocess, up to its time limit: too slow
    to judge each keystroke of an edit)."""
    return _evaluate(text, path, model_dir, backend_search(backend_dirs), auto_complete).report


@dataclass(frozen=True)
class _Evaluation:
    """One config judged: the report, the normalised config (None when it did not parse), field positions."""

    report: ValidationReport
    config: mc.ModelConfig | None
    sites: dict[pbtxt.FieldKey, pbtxt.FieldSite]


def _evaluate(
    text: str, path: str, model_dir: Path | None, search: BackendSearch, auto_complete: bool = True
) -> _Evaluation:
    """Parse, normalise and judge one config's text."""
    try:
        parsed = pbtxt.loads(text, path)
    except pbtxt.ConfigSyntaxError as exc:
        problem = Problem(ERROR, path, exc.line, exc.column, None, exc.message)
        return _Evaluation(ValidationReport(path, (problem,), _model_names(model_dir)), None, {})
    config = mc.ModelConfig()
    config.CopyFrom(parsed)
    findings = _judge(config, path, model_dir, search, auto_complete)
    sites = pbtxt.field_sites(text)
    problems = tuple(_place(finding, path, sites) for finding in findings)
    return _Evaluation(ValidationReport(path, problems, _model_names(model_dir)), config, sites)


def _model_names(model_dir: Path | None) -> tuple[str, ...]:
    """The judged model folder's name, if any."""
    return (model_dir.name,) if model_dir is not None else ()


def _read_and_evaluate(config_path: Path, model_dir: Path | None, search: BackendSearch) -> _Evaluation:
    """Read a config file and judge it; an unreadable (or absurdly large) file is one error."""
    try:
        size = config_path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise OSError(f"{size} bytes is too large for a model config (at most {MAX_CONFIG_BYTES})")
        text = config_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problem = Problem(ERROR, str(config_path), None, None, None, f"cannot read: {excerpted(str(exc))}")
        return _Evaluation(ValidationReport(str(config_path), (problem,), _model_names(model_dir)), None, {})
    return _evaluate(text, str(config_path), model_dir, search)


def _read_and_validate(
    config_path: Path, model_dir: Path | None, report_path: str, search: BackendSearch
) -> ValidationReport:
    """A config file's report, under the path the caller asked about."""
    report = _read_and_evaluate(config_path, model_dir, search).report
    return ValidationReport(report_path, report.problems, report.models)


def _validate_repository(repository: Path, search: BackendSearch) -> ValidationReport:
    """Every model folder of a repository, then what ensembles need of the models they compose."""
    folders = sorted(p for p in repository.iterdir() if p.is_dir() and not p.name.startswith("."))
    problems: dict[str, list[Problem]] = {}
    models: dict[str, triton_rules_repository.ModelEntry] = {}
    evaluations: dict[str, _Evaluation] = {}
    loaded: dict[str, set[int]] = {}
    for folder in folders:
        config_path = folder / CONFIG_NAME
        if not config_path.is_file():
            problems[folder.name] = [Problem(WARNING, str(folder), None, None, None, NO_CONFIG)]
            models[folder.name] = mc.ModelConfig(name=folder.name)  # auto-completed by Triton: IO unknown
            continue
        evaluation = _read_and_evaluate(config_path, folder, search)
        evaluations[folder.name] = evaluation
        problems[folder.name] = list(evaluation.report.problems)
        models[folder.name] = _model_entry(evaluation, folder)
        if evaluation.config is not None:
            versions = _policy_versions(evaluation.config, version_folders(folder))
            loaded[folder.name] = {int(v.name) for v in versions}
    for name, finding in triton_rules_repository.check_ensembles(models, loaded).items():
        evaluation = evaluations[name]
        problems[name].append(_place(finding, evaluation.report.path, evaluation.sites))
    for name, finding in _device_findings(evaluations, repository):
        evaluation = evaluations[name]
        problems[name].append(_place(finding, evaluation.report.path, evaluation.sites))
    flat = [problem for folder in folders for problem in problems[folder.name]]
    if not folders:
        flat.append(
            Problem(WARNING, str(repository), None, None, None, "no model folders: the repository is empty")
        )
    return ValidationReport(str(repository), tuple(flat), tuple(f.name for f in folders))


def _device_findings(evaluations: dict[str, _Evaluation], repository: Path) -> list[tuple[str, Finding]]:
    """NPUs the host lacks (npu-smi asked only when a model names more than NPU 0, or an npu_ge model none)
    and over-commitment."""
    configs = {name: (e.config, repository / name) for name, e in evaluations.items()
               if e.config is not None and e.report.ok}
    many = any(d > 0 for config, _ in configs.values()
               for d in (ge_rules_devices.instance_group(config) or InstanceGroupSpec()).device_ids)
    many = many or any(config.backend == "npu_ge" and ge_rules_devices.instance_group(config) is None
                       for config, _ in configs.values())  # npu_ge without device_ids: every NPU
    return ge_rules_devices.check_devices(configs, host_npu_count() if many else None)


def _model_entry(evaluation: _Evaluation, folder: Path) -> triton_rules_repository.ModelEntry:
    """A judged model as an ensemble sees it: its config, or why Triton would not load it."""
    if evaluation.config is not None and evaluation.report.ok:
        return evaluation.config
    first = evaluation.report.errors[0]
    at_load = any(_field_under(first.field or "", parent) for parent in LOAD_TIME_FIELDS)
    versions = version_folders(folder)
    return triton_rules_repository.Unavailable(first.message, at_load, versions[-1].name if versions else "1")


def _field_under(field: str, parent: str) -> bool:
    """Whether a field path is parent or lies below it: input[0].dims is under input, inputs is not."""
    return field == parent or (field.startswith(parent) and field[len(parent)] in ".[")


def _judge(
    config: mc.ModelConfig,
    path: str,
    model_dir: Path | None,
    search: BackendSearch,
    auto_complete: bool = True,
) -> list[Finding]:
    """All findings for a parsed config, normalising it first as Triton does."""
    findings: list[Finding] = []
    if not config.name:
        config.name = model_dir.name if model_dir is not None else _folder_name(path)
    if model_dir is not None:
        findings += _fill_backend_from_files(config, model_dir)
    triton_rules.autofill_backend(config)
    if model_dir is None and not config.backend and not config.platform:
        findings.append(
            warning(
                "backend",
                "no 'backend' or 'platform': Triton infers it from the files in the "
                "version folder (e.g. model.py, model.onnx)",
            )
        )
        config.backend = "unknown"
    if model_dir is not None and auto_complete:
        findings += _auto_complete(config, model_dir, search)
    findings += triton_rules.check_config(config)
    findings += triton_json.check_json_numbers(config)
    findings += ge_rules.check_ge_config(config)
    versions = version_folders(model_dir) if model_dir is not None else []
    findings += triton_rules_backends.check_backend_exists(config, search, model_dir, versions)
    if model_dir is not None:
        findings += _folder_findings(config, model_dir)
    return findings


def _auto_complete(config: mc.ModelConfig, model_dir: Path, search: BackendSearch) -> list[Finding]:
    """Complete config in place with its Python code's auto_complete_config (newest version loaded), as
    Triton does at load; what goes wrong there is a finding."""
    versions = _policy_versions(config, version_folders(model_dir))
    if not versions or config.platform == ENSEMBLE_PLATFORM:
        return []
    completion = triton_rules_autocomplete.complete(config, versions[-1], search.directories)
    config.CopyFrom(completion.config)
    return list(completion.findings)


def _folder_name(path: str) -> str:
    """The folder a config file sits in: Triton names an unnamed model after it."""
    candidate = Path(path)
    if not candidate.parent.name and candidate.exists():
        candidate = candidate.resolve()
    return candidate.parent.name


def version_folders(model_dir: Path) -> list[Path]:
    """A model's version folders (numeric names), in version order."""
    found = [p for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit()]
    return sorted(found, key=lambda p: int(p.name))


def _fill_backend_from_files(config: mc.ModelConfig, model_dir: Path) -> list[Finding]:
    """Without backend or platform, Triton infers the backend from the first version folder's files."""
    if config.backend or config.platform:
        return []
    versions = version_folders(model_dir)
    contents = {p.name for p in versions[0].iterdir()} if versions else set()
    for file_name, backend in FILE_BACKENDS.items():
        if file_name in contents:
            config.backend = backend
            return []
    if "." in model_dir.name:
        config.backend = model_dir.name.split(".", 1)[1]
        return []
    config.backend = "unknown"  # reported here once; Triton stops at this error
    return [
        error(
            "backend",
            f"Invalid model name: Could not determine backend for model '{model_dir.name}' "
            "with no backend in model configuration. Expected model name of the form "
            "'model.<backend_name>'.",
        )
    ]


def _folder_findings(config: mc.ModelConfig, model_dir: Path) -> list[Finding]:
    """Folder name equals model name; at least one version folder; the files a GE backend needs."""
    findings: list[Finding] = []
    if config.name != model_dir.name:
        findings.append(
            error(
                "name",
                f"unexpected directory name '{model_dir.name}' for model '{config.name}', "
                "directory name must equal model name",
            )
        )
    versions = _policy_versions(config, version_folders(model_dir))
    if not versions:
        findings.append(
            error(
                "version_policy",
                f"at least one version must be available under the version policy of model '{config.name}'",
            )
        )
    findings += ge_rules.check_ge_files(config, model_dir, versions)
    findings += triton_rules_warmup.check_warmup_files(config, model_dir)
    findings += triton_rules_state.check_state_files(config, model_dir)
    return findings


def _policy_versions(config: mc.ModelConfig, versions: list[Path]) -> list[Path]:
    """The version folders Triton's version policy would load (default: latest 1)."""
    policy = config.version_policy
    which = policy.WhichOneof("policy_choice")
    if which == "all":
        return versions
    if which == "specific":
        wanted = set(policy.specific.versions)
        return [v for v in versions if int(v.name) in wanted]
    count = policy.latest.num_versions if which == "latest" else 1
    return versions[-count:] if count > 0 else []


def _place(finding: Finding, path: str, sites: dict[pbtxt.FieldKey, pbtxt.FieldSite]) -> Problem:
    """A finding with the line and column where its field (or nearest written parent) is."""
    site = pbtxt.locate(sites, written_path(finding.field)) if finding.field else None
    line, column = (site.line, site.column) if site else (None, None)
    return Problem(finding.severity, path, line, column, finding.field or None, finding.message)


_PART = re.compile(r"([A-Za-z_]\w*)(\[[^\]]*\])?")


def written_path(field: str) -> str:
    """A field path as the text writes it: a map entry's message fields sit under its `value`, so
    `model_warmup[0].inputs["IN"].dims` is written `model_warmup[0].inputs["IN"].value.dims`."""
    descriptor: Descriptor | None = mc.ModelConfig.DESCRIPTOR
    entry: Descriptor | None = None  # the map entry a quoted index just chose
    parts: list[str] = []
    for name, index in _PART.findall(field):
        if entry is not None:
            descriptor = entry
            if name not in ("key", "value"):
                parts.append("value")
                descriptor = entry.fields_by_name["value"].message_type
        known = descriptor.fields_by_name.get(name) if descriptor is not None else None
        descriptor = known.message_type if known is not None else None
        entry = descriptor if descriptor is not None and descriptor.GetOptions().map_entry and index else None
        parts.append(name + index)
    return ".".join(parts)
