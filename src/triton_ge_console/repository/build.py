"""Build a Triton model repository from a spec: staged beside REPO, swapped in per model, only changes."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import shutil
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triton_ge_console.backend_glue.generate_protocol import TOKENIZER_FILENAME
from triton_ge_console.errors import GeConsoleError
from triton_ge_console.model_files import external_data
from triton_ge_console.repository import demo_models, digest_cache
from triton_ge_console.repository.build_commit import (
    FileContent,
    ModelChange,
    ModelPlan,
    build_lock,
    commit_build,
    staging_dir,
)
from triton_ge_console.repository.configgen import OM_FILENAME, ONNX_FILENAME, config_text
from triton_ge_console.repository.demo_tokenizer import DEMO_TOKENIZER, demo_tokenizer_json
from triton_ge_console.repository.placing import Transfers, copy_file
from triton_ge_console.repository.progress import ProgressHook, for_file
from triton_ge_console.repository.spec.load import model_name_problem, parse_spec
from triton_ge_console.repository.spec.types import DeploymentSpec, ModelSpec
from triton_ge_console.repository.starter import STARTER_SPEC

MANIFEST_NAME = ".ge-console-build.json"  # Triton scans only directories, so a file here is never a model
MANIFEST_FORMAT = 1
STATUSES = ("added", "updated", "unchanged", "removed")


class BuildError(GeConsoleError, RuntimeError):
    """The repository could not be built; REPO is as it was before."""


@dataclass(frozen=True)
class BuildReport:
    """Per-model outcome of a build, in spec order, removed models last."""

    repository: Path
    changes: tuple[ModelChange, ...]

    def names(self, *statuses: str) -> tuple[str, ...]:
        """Models with any of the given statuses."""
        return tuple(c.name for c in self.changes if c.status in statuses)

    @property
    def changed(self) -> tuple[str, ...]:
        """Models Triton should (re)load or unload: added, updated or removed."""
        return self.names("added", "updated", "removed")

    def status(self, name: str) -> str | None:
        """The status of one model, if the build knew it."""
        return next((c.status for c in self.changes if c.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what `build --json` prints)."""
        return {
            "repository": str(self.repository),
            "models": [
                {"name": c.name, "status": c.status, "digest": c.digest, "linked": c.linked,
                 "copied": c.copied, "why_copied": c.why_copied, "replaced": c.replaced}
                for c in self.changes
            ],
            **{status: list(self.names(status)) for status in STATUSES},
        }

    def lines(self) -> list[str]:
        """One line per model and a summary, for people."""
        lines = [f"{c.status:<9}  {c.name}  {c.placement()}".rstrip() for c in self.changes]
        counts = ", ".join(f"{len(self.names(s))} {s}" for s in STATUSES)
        return [*lines, f"{self.repository}: {counts}"]


def _digest_of(content: FileContent, progress: ProgressHook | None = None) -> str:
    """Hash of literal bytes; for a file, digest_cache.file_digest (its identity or a remembered hash: no
    bytes read, except of a file modified in the last two seconds)."""
    if isinstance(content, bytes):
        return hashlib.sha256(content).hexdigest()
    return digest_cache.file_digest(content, for_file(progress, f"hashing {content.name}"))


def tree_digest(file_hashes: dict[str, str]) -> str:
    """One hash for a folder: its relative paths and their content hashes."""
    digest = hashlib.sha256()
    for rel in sorted(file_hashes):
        digest.update(f"{rel}\0{file_hashes[rel]}\n".encode())
    return digest.hexdigest()


def folder_digest(folder: Path, ignore: Collection[str] = ()) -> str | None:
    """The tree_digest of a folder on disk (files under a path part named in `ignore` left out), or None."""
    if not folder.is_dir():
        return None
    ignored = set(ignore)
    hashes = {
        p.relative_to(folder).as_posix(): _digest_of(p)
        for p in folder.rglob("*")
        if (p.is_file() or p.is_symlink()) and not ignored.intersection(p.relative_to(folder).parts)
    }
    return tree_digest(hashes)


def model_files(model: ModelSpec) -> dict[str, FileContent]:
    """What a model folder holds: config.pbtxt and, per version, the ONNX and the OM when given."""
    files: dict[str, FileContent] = {"config.pbtxt": config_text(model).encode("utf-8")}
    onnx: FileContent | None = model.onnx_path
    if demo_models.is_demo(model.source):
        onnx = demo_models.demo_bytes(model.source)
    weights = _external_files(model.name, onnx) if isinstance(onnx, Path) else {}
    for version in model.versions:
        if onnx is not None:
            files[f"{version}/{ONNX_FILENAME}"] = onnx
        if model.om_path is not None:
            files[f"{version}/{OM_FILENAME}"] = model.om_path
        files.update({f"{version}/{rel}": path for rel, path in weights.items()})
        if model.generate is not None and model.generate.tokenizer is not None:
            files[f"{version}/{TOKENIZER_FILENAME}"] = _tokenizer_file(model.generate.tokenizer)
    return files


def _tokenizer_file(tokenizer: str) -> FileContent:
    """A generate model's tokenizer.json: the built-in demo one, or the spec's file."""
    if tokenizer == DEMO_TOKENIZER:
        return demo_tokenizer_json().encode("utf-8")
    return Path(tokenizer)


def _external_files(name: str, onnx: Path) -> dict[str, Path]:
    """The external-data files an ONNX source names, at the paths it expects; a bad one is a BuildError."""
    problems = external_data.check_external_data(onnx)
    if problems:
        raise BuildError(f"model '{name}': {problems[0]}")
    try:
        weights = external_data.external_files(onnx)
    except Exception:
        return {}  # not a readable ONNX: the spec reader said so already
    clash = set(weights) & {ONNX_FILENAME, OM_FILENAME}
    if clash:
        raise BuildError(f"model '{name}': {onnx}: external data '{clash.pop()}' has the name the "
                         "repository gives the model file itself; save the weights under another name")
    return weights


def plan_files(
    model: ModelSpec,
    files: dict[str, FileContent],
    progress: ProgressHook | None,
    known: dict[str, str] | None = None,
) -> ModelPlan:
    """A model's plan from its files, hashing those whose hash is not known."""
    known = known or {}
    by_content: dict[FileContent, str] = {}  # a source shared by several versions is read once
    try:
        hashes = {
            rel: known.get(rel) or by_content.get(content) or by_content.setdefault(
                content, _digest_of(content, progress))
            for rel, content in files.items()
        }
    except OSError as exc:
        raise BuildError(f"model '{model.name}': cannot read {exc.filename}: {exc.strerror}") from None
    return ModelPlan(model, files, tree_digest(hashes), hashes)


class _Ahead:
    """A folder beside REPO (same filesystem) for copies made while planning; made on first use."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.folder: Path | None = None

    def file(self, rel: str) -> Path:
        """A new path under the folder, its parents made."""
        if self.folder is None:
            self.folder = staging_dir(self.out)
        target = self.folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def remove(self) -> None:
        """Remove the folder and what is left in it (REPO keeps its links to the copies)."""
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def _plan_copying_ahead(out: Path, model: ModelSpec, transfers: Transfers, ahead: _Ahead) -> ModelPlan:
    """The plan of a model new to REPO, whose files that must be copied are copied now, beside REPO, and
    given their source's digest (read before the copy, which it must outlast unchanged)."""
    problem = model_name_problem(model.name)
    if problem:
        raise BuildError(f"model name '{model.name}' {problem}")
    files = model_files(model)
    if (out / model.name).exists() or (out / model.name).is_symlink():
        return plan_files(model, files, transfers.progress)
    known: dict[str, str] = {}
    digests: dict[Path, str] = {}  # source → hash, for a source copied once for several versions
    for rel, content in files.items():
        if not isinstance(content, Path) or content in transfers.copies:
            known.update({rel: digests[content]} if content in digests else {})
            continue  # bytes; or copied already: placing links the copy
        try:
            why = transfers.copy_reason(content, out.parent)
            if why is not None:
                copy = ahead.file(f"{model.name}/{rel}")
                copier = functools.partial(
                    copy_file, what=f"copying {model.name}/{rel}", progress=transfers.progress
                )
                known[rel] = digests[content] = digest_cache.copy_identified(content, copy, copier)
                files[rel] = transfers.copies[content] = copy
                transfers.precopied[copy] = why
        except OSError as exc:
            if exc.filename != str(content):
                raise  # writing the copy failed: the repository is unchanged, build_repository says so
            raise BuildError(f"model '{model.name}': cannot read {exc.filename}: {exc.strerror}") from None
    return plan_files(model, files, transfers.progress, known)


def read_manifest(repository: Path) -> dict[str, Any]:
    """The manifest the last build wrote ({} when there is none or it is unreadable)."""
    try:
        data = json.loads((repository / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("format") == MANIFEST_FORMAT else {}


def manifest_digests(repository: Path) -> dict[str, str]:
    """Model name → content digest as of the last build (what `reload --changed` compares against)."""
    models = read_manifest(repository).get("models", {})
    return {name: entry["digest"] for name, entry in models.items() if isinstance(entry, dict)}


def build_repository(
    spec: DeploymentSpec, out: Path, link: bool = True, progress: ProgressHook | None = None,
    force: bool = False,
) -> BuildReport:
    """Build or update REPO from spec; on any failure REPO is untouched and no staging folder is left.

    Model files are hard-linked from their sources where the filesystem allows (link=False: copied). A
    model folder no build made (not in REPO's manifest) is refused, replaced only with force."""
    out = Path(os.path.abspath(out))
    if out.exists() and not out.is_dir():
        raise BuildError(f"{out} exists and is not a directory")
    with digest_cache.deferred():
        return _build(spec, out, Transfers(link=link, reuse_root=out, progress=progress), force)


def _cannot_build(out: Path, exc: OSError) -> BuildError:
    """An OS error during a build, in one line naming the path it concerned."""
    where = f" ({exc.filename})" if exc.filename else ""
    return BuildError(f"cannot build {out}: {exc.strerror or exc}{where}; the repository is unchanged")


def _build(spec: DeploymentSpec, out: Path, transfers: Transfers, force: bool) -> BuildReport:
    """build_repository's work, under one save of the digest cache."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _cannot_build(out, exc) from None
    ahead = _Ahead(out)
    try:
        with build_lock(out):  # first: it sweeps staging folders a killed build left, copies ahead included
            plans = [_plan_copying_ahead(out, model, transfers, ahead) for model in spec.models]
            previous = read_manifest(out)
            foreign = foreign_folders(out, [p.model.name for p in plans], previous)
            if foreign and not force:
                raise BuildError(_refusal(out, foreign))
            changes = _changes(out, plans, previous, foreign)
            staged = [_reusing_unchanged_files(out, p, changes) for p in plans]
            manifest = _manifest_text(spec, plans, changes, previous)
            commit_build(out, staged, changes, manifest, MANIFEST_NAME, transfers)
            _remember_hashes(out, plans, changes)
    except OSError as exc:
        raise _cannot_build(out, exc) from None
    finally:
        ahead.remove()
    return BuildReport(out, tuple(_with_placement(c, transfers) for c in changes))


def _reusing_unchanged_files(out: Path, plan: ModelPlan, changes: list[ModelChange]) -> ModelPlan:
    """An updated model's plan whose unchanged model files come from its current folder (linked, so a
    config-only edit copies no weights); the current files are read-only to us, never rewritten."""
    status = next(c.status for c in changes if c.name == plan.model.name)
    if status != "updated":
        return plan
    files = dict(plan.files)
    for rel, content in plan.files.items():
        current = out / plan.model.name / rel
        served = isinstance(content, Path) and current.is_file() and not current.is_symlink()
        if served and _digest_of(current) == plan.hashes[rel]:
            files[rel] = current
    return ModelPlan(plan.model, files, plan.digest, plan.hashes)


def _remember_hashes(out: Path, plans: list[ModelPlan], changes: list[ModelChange]) -> None:
    """Note the hashes of the files just placed, so the next no-op build or reload reads none of them."""
    written = {c.name for c in changes if c.status in ("added", "updated")}
    for plan in plans:
        if plan.model.name in written:
            for rel, digest in plan.hashes.items():
                with contextlib.suppress(OSError):
                    digest_cache.remember(out / plan.model.name / rel, digest)


def _with_placement(change: ModelChange, transfers: Transfers) -> ModelChange:
    """A change with how many of its model files were linked and copied, and why copied."""
    placed = [(how, why) for model, how, why in transfers.placed if model == change.name]
    if not placed:
        return change
    why = next((w for how, w in placed if how == "copied" and w), None)
    linked = sum(how == "linked" for how, _ in placed)
    return dataclasses.replace(change, linked=linked, copied=len(placed) - linked, why_copied=why)


def foreign_folders(out: Path, names: list[str], previous: dict[str, Any]) -> list[str]:
    """The names among these whose place in REPO holds something no build made: not in the manifest
    (a user's own folder, or any folder of a repository without one), or a symlink (builds make none)."""
    built = previous.get("models", {})
    return [name for name in names
            if (out / name).is_symlink() or ((out / name).exists() and name not in built)]


def _refusal(out: Path, foreign: list[str]) -> str:
    """Why the build stops before touching a folder it did not make, and what to do."""
    first = out / foreign[0]
    more = f" (and {len(foreign) - 1} more: {', '.join(foreign[1:4])}{', ...' if len(foreign) > 4 else ''})"
    return (
        f"{first}: a model folder no ge-console build made{more if len(foreign) > 1 else ''} "
        f"(not listed in {out / MANIFEST_NAME}); it is left as it is: build into another folder, "
        f"or pass --force to replace it"
    )


def _changes(
    out: Path, plans: list[ModelPlan], previous: dict[str, Any], foreign: Collection[str] = ()
) -> list[ModelChange]:
    """Compare what each model folder holds now with what the spec wants."""
    changes = []
    for plan in plans:
        name = plan.model.name
        folder = out / name
        current = None if folder.is_symlink() else folder_digest(folder)  # a link is not a folder we built
        status = "added" if current is None else "unchanged" if current == plan.digest else "updated"
        replaced = name in foreign and status != "unchanged"  # an identical folder is only adopted
        changes.append(ModelChange(name, status, plan.digest, replaced=replaced))
    wanted = {plan.model.name for plan in plans}
    for name in previous.get("models", {}):
        if name not in wanted and model_name_problem(name) is None and (out / name).exists():
            changes.append(ModelChange(name, "removed", None))
    return changes


def _manifest_text(
    spec: DeploymentSpec, plans: list[ModelPlan], changes: list[ModelChange], previous: dict[str, Any]
) -> str:
    """The manifest: per-model digests, and the changes of the last build that changed anything."""
    changed = {
        status: [c.name for c in changes if c.status == status] for status in ("added", "updated", "removed")
    }
    last = changed if any(changed.values()) else previous.get("last_changes", changed)
    data = {
        "format": MANIFEST_FORMAT,
        "deployment": spec.name,
        "models": {
            p.model.name: {
                "digest": p.digest,
                "backend": p.model.backend,
                "versions": list(p.model.versions),
                "files": sorted(p.files),
            }
            for p in plans
        },
        "last_changes": last,
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def seed_spec() -> DeploymentSpec:
    """The seed deployment (llama_model and bert_model from the built-in demo models)."""
    return parse_spec(STARTER_SPEC, "seed.yaml", default_name="seed")


def build_demo_repository(out: Path) -> BuildReport:
    """Build the seed deployment's repository from the built-in demo sources (for `ge-console demo`)."""
    return build_repository(seed_spec(), out)
