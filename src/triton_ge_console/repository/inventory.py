"""What the console reads from a model repository on disk: models, config summaries, disk-vs-loaded diffs."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triton_ge_console.triton_terms import RELOAD_PARAMETER

if TYPE_CHECKING:
    from tritonclient.grpc import model_config_pb2


@dataclass(frozen=True)
class RepoModel:
    """One model folder: its config file and numbered versions."""

    name: str
    config_path: Path
    versions: tuple[str, ...]


def list_models(repository: Path) -> list[RepoModel]:
    """Model folders (those with a config.pbtxt) in name order."""
    if not repository.is_dir():
        return []
    found = []
    for folder in sorted(p for p in repository.iterdir() if p.is_dir()):
        config = folder / "config.pbtxt"
        if config.is_file():
            versions = tuple(sorted((v.name for v in folder.iterdir() if v.is_dir() and v.name.isdigit()),
                                    key=int))
            found.append(RepoModel(folder.name, config, versions))
    return found


def config_summary(config_path: Path) -> str:
    """Backend, batching, instances and GE parameters in one line; the parse error when it fails."""
    from triton_ge_console.repository import pbtxt  # protobuf, grpc, numpy: not at the console's start

    try:
        config = pbtxt.load(config_path)
    except (OSError, pbtxt.ConfigSyntaxError) as exc:
        return f"unreadable ({exc})"
    parts = [f"backend {config.backend or config.platform or '—'}", f"max_batch {config.max_batch_size}"]
    if config.HasField("dynamic_batching"):
        sizes = ",".join(str(s) for s in config.dynamic_batching.preferred_batch_size) or "any"
        delay = config.dynamic_batching.max_queue_delay_microseconds
        parts.append(f"dynamic batching [{sizes}] delay {delay}µs")
        parts += queue_summary(config.dynamic_batching)
    instances = sum(max(group.count, 1) for group in config.instance_group) or 1
    parts.append(f"instances {instances}")
    params = [f"{key}={value.string_value}" for key, value in sorted(config.parameters.items())]
    if params:
        parts.append("params " + " ".join(params)[:80])
    return " · ".join(parts)


class ConfigSummaries:
    """Each model's config.pbtxt as one line, read again only when the file changes: the reader the console
    hands its dashboard, which never opens the repository itself."""

    def __init__(self, locate: Callable[[], Path | None]) -> None:
        self._locate = locate  # the repository, when known (a launched session's is known only later)
        self._known: dict[Path, tuple[float, str]] = {}  # config path -> (its mtime, its summary)

    def summary(self, model: str) -> str:
        """The model's config in one line; "—" without a repository or a config.pbtxt for it."""
        repository = self._locate()
        if repository is None:
            return "—"
        path = repository / model / "config.pbtxt"
        try:
            stamp = path.stat().st_mtime
        except OSError:
            return "—"
        known = self._known.get(path)
        if known is None or known[0] != stamp:
            known = self._known[path] = (stamp, config_summary(path))
        return known[1]


def decoupled(config_path: Path) -> bool:
    """Whether the model streams its responses (a generate model's config); False when unreadable."""
    from triton_ge_console.repository import pbtxt  # as in config_summary: not at the console's start

    try:
        return bool(pbtxt.load(config_path).model_transaction_policy.decoupled)
    except (OSError, pbtxt.ConfigSyntaxError):
        return False


def queue_summary(batching: model_config_pb2.ModelDynamicBatching) -> list[str]:
    """The queue policy in a few words: size limit, timeout and its action, priority levels."""
    from tritonclient.grpc import model_config_pb2  # as in config_summary: not at the console's start

    parts = [f"{batching.priority_levels} priority levels"] if batching.priority_levels else []
    if batching.HasField("default_queue_policy"):
        policy = batching.default_queue_policy
        size = policy.max_queue_size or "unbounded"
        timeout = policy.default_timeout_microseconds
        action = model_config_pb2.ModelQueuePolicy.TimeoutAction.Name(policy.timeout_action)
        override = " (overridable)" if policy.allow_timeout_override else ""
        parts.append(f"queue {size}, timeout {f'{timeout}µs {action}' if timeout else 'none'}{override}")
    return parts


def loaded_config_text(loaded: dict[str, Any], disk_text: str) -> str:
    """Triton's loaded config (JSON) as pbtxt, limited to the fields the file sets (no default noise), and
    without the parameter a reload adds to make Triton load anew (no setting of the model's)."""
    from google.protobuf import json_format  # as in config_summary: not at the console's start

    from triton_ge_console.repository import pbtxt

    on_disk = pbtxt.loads(disk_text)
    config = json_format.ParseDict(loaded, pbtxt.ModelConfig(), ignore_unknown_fields=True)
    if RELOAD_PARAMETER in config.parameters:
        del config.parameters[RELOAD_PARAMETER]
    wanted = {field.name for field, _ in on_disk.ListFields()}
    for field, _ in config.ListFields():
        if field.name not in wanted:
            config.ClearField(field.name)
    return pbtxt.dumps(config)


def config_diff(disk_text: str, loaded: dict[str, Any] | None) -> list[str]:
    """Unified diff lines between the file on disk and what Triton has loaded (both normalised)."""
    if loaded is None:
        return ["(the model is not loaded: nothing to compare)"]
    from google.protobuf import json_format  # as in config_summary: not at the console's start

    from triton_ge_console.repository import pbtxt

    try:
        disk = pbtxt.dumps(pbtxt.loads(disk_text))
        served = loaded_config_text(loaded, disk_text)
    except (pbtxt.ConfigSyntaxError, json_format.ParseError) as exc:
        return [f"(cannot compare: {exc})"]
    diff = list(difflib.unified_diff(served.splitlines(), disk.splitlines(), "loaded by Triton", "on disk",
                                     lineterm="", n=1))
    return diff or ["(no difference: Triton serves the file on disk)"]


def model_of_path(repository: Path, path: Path) -> str | None:
    """The model folder a changed file belongs to."""
    try:
        relative = path.resolve().relative_to(repository.resolve())
    except ValueError:
        return None
    return relative.parts[0] if relative.parts else None


@dataclass(frozen=True)
class ConfigFinding:
    """One validation result for a config file: severity, line (when known), field, message."""

    severity: str  # "error" | "warning"
    line: int | None
    field: str
    message: str


def check_config_text(text: str, path: Path) -> list[ConfigFinding]:
    """The repository validator's verdict on config text that may not be saved yet (file, line, field); the
    model's auto_complete_config is not run here (a subprocess per edit would stall the console)."""
    from triton_ge_console.repository.validate import validate_config_text

    folder = path.parent if path.parent.is_dir() else None
    report = validate_config_text(text, str(path), folder, auto_complete=False)
    return [ConfigFinding(p.severity, p.line, p.field or "", p.message) for p in report.problems]
