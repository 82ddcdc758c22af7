"""The builder: the seed's exact config, atomic failures, byte- and mtime-stable incremental rebuilds."""

from __future__ import annotations

import hashlib
import json
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.waiting import wait_until
from triton_ge_console.repository import pbtxt
from triton_ge_console.repository.build import (
    MANIFEST_NAME,
    BuildError,
    build_demo_repository,
    build_repository,
    folder_digest,
    manifest_digests,
    read_manifest,
)
from triton_ge_console.repository.demo_models import demo_bytes
from triton_ge_console.repository.spec.load import load_spec
from triton_ge_console.repository.spec.types import DeploymentSpec, ModelSpec, ServerSpec

SEED_LLAMA_CONFIG = """
name: "llama_model"
backend: "ge"
max_batch_size: 8
input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "logits" data_type: TYPE_FP32 dims: [ -1, 32000 ] } ]
dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 500 }
parameters { key: "om_model_path" value { string_value: "model.om" } }
"""

TWO_MODELS = """
models:
  - name: llama_model
    backend: ge
    source: demo:llama
    max_batch_size: 8
  - name: bert_model
    backend: ge
    source: demo:bert
    max_batch_size: 4
    dynamic_batching: {max_queue_delay_microseconds: 100}
"""


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """Every file and folder under root with its content hash and mtime (nanoseconds)."""
    state = {".": ("dir", root.stat().st_mtime_ns)}
    for path in sorted(root.rglob("*")):
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        state[path.relative_to(root).as_posix()] = (digest, path.stat().st_mtime_ns)
    return state


def leftovers(parent: Path) -> list[str]:
    """Staging folders the builder might have left beside a repository."""
    return [p.name for p in parent.iterdir() if ".ge-build-" in p.name]


def _spec(tmp_path: Path, text: str) -> DeploymentSpec:
    path = tmp_path / "deploy.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return load_spec(path)


@pytest.fixture(scope="module")
def seed_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seed deployment built once for the read-only tests."""
    repo = tmp_path_factory.mktemp("seed") / "repo"
    report = build_demo_repository(repo)
    assert report.names("added") == ("llama_model", "bert_model")
    return repo


def test_seed_llama_config_is_exactly_the_articles(seed_repo: Path) -> None:
    """llama_model's config.pbtxt says exactly what the seed article's config says, nothing more."""
    built = pbtxt.load(seed_repo / "llama_model" / "config.pbtxt")
    assert built == pbtxt.loads(SEED_LLAMA_CONFIG)


def test_seed_bert_config_and_layout(seed_repo: Path) -> None:
    """bert_model sits beside llama: tensors read from the ONNX, on NPU 1, files in version folder 1."""
    built = pbtxt.load(seed_repo / "bert_model" / "config.pbtxt")
    assert built == pbtxt.loads("""
        name: "bert_model" backend: "ge" max_batch_size: 16
        input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] },
                { name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] } ]
        output [ { name: "pooled" data_type: TYPE_FP32 dims: [ 64 ] } ]
        dynamic_batching { preferred_batch_size: [ 8, 16 ] max_queue_delay_microseconds: 200 }
        parameters { key: "om_model_path" value { string_value: "model.om" } }
        parameters { key: "device_ids" value { string_value: "1" } }
    """)
    files = sorted(p.relative_to(seed_repo).as_posix() for p in seed_repo.rglob("*") if p.is_file())
    assert files == [
        MANIFEST_NAME,
        "bert_model/1/model.onnx",
        "bert_model/config.pbtxt",
        "llama_model/1/model.onnx",
        "llama_model/config.pbtxt",
    ]
    assert (seed_repo / "llama_model" / "1" / "model.onnx").read_bytes() == demo_bytes("demo:llama")
    assert not leftovers(seed_repo.parent)


def test_config_text_round_trips(seed_repo: Path) -> None:
    """The written text is what pbtxt.dumps gives for the parsed message (stable formatting)."""
    for model in ("llama_model", "bert_model"):
        text = (seed_repo / model / "config.pbtxt").read_text(encoding="utf-8")
        assert pbtxt.dumps(pbtxt.loads(text)) == text


def test_manifest_records_digests_of_the_folders(seed_repo: Path) -> None:
    """The manifest's per-model digest equals the digest of the folder on disk."""
    digests = manifest_digests(seed_repo)
    assert digests == {name: folder_digest(seed_repo / name) for name in ("llama_model", "bert_model")}
    assert read_manifest(seed_repo)["last_changes"]["added"] == ["llama_model", "bert_model"]


def test_demo_build_is_reproducible(seed_repo: Path, tmp_path: Path) -> None:
    """A second repository built elsewhere holds byte-identical files."""
    other = tmp_path / "again"
    build_demo_repository(other)
    assert {k: v[0] for k, v in snapshot(other).items()} == {k: v[0] for k, v in snapshot(seed_repo).items()}


def test_rebuild_changes_no_byte_and_no_mtime(tmp_path: Path) -> None:
    """Building the same spec again reports unchanged and leaves every file and folder as it was."""
    repo = tmp_path / "repo"
    spec = _spec(tmp_path, TWO_MODELS)
    build_repository(spec, repo)
    before = snapshot(repo)
    report = build_repository(_spec(tmp_path, TWO_MODELS), repo)
    assert [(c.name, c.status) for c in report.changes] == [
        ("llama_model", "unchanged"),
        ("bert_model", "unchanged"),
    ]
    assert report.changed == ()
    assert snapshot(repo) == before
    assert not leftovers(tmp_path)


def test_edit_updates_only_that_model(tmp_path: Path) -> None:
    """Changing bert's batching rewrites bert's folder only; llama's files keep their mtimes."""
    repo = tmp_path / "repo"
    build_repository(_spec(tmp_path, TWO_MODELS), repo)
    before = snapshot(repo)
    report = build_repository(_spec(tmp_path, TWO_MODELS.replace("100}", "250}")), repo)
    assert report.status("bert_model") == "updated" and report.status("llama_model") == "unchanged"
    assert report.changed == ("bert_model",)
    after = snapshot(repo)
    assert {k: v for k, v in after.items() if k.startswith("llama_model")} == {
        k: v for k, v in before.items() if k.startswith("llama_model")
    }
    assert "max_queue_delay_microseconds: 250" in (repo / "bert_model" / "config.pbtxt").read_text()
    assert read_manifest(repo)["last_changes"] == {"added": [], "updated": ["bert_model"], "removed": []}


def test_removed_model_is_reported_and_its_folder_goes(tmp_path: Path) -> None:
    """A model dropped from the spec is removed; folders the builder never made are left alone."""
    repo = tmp_path / "repo"
    build_repository(_spec(tmp_path, TWO_MODELS), repo)
    (repo / "hand_made").mkdir()
    (repo / "hand_made" / "config.pbtxt").write_text('name: "hand_made"')
    only_llama = TWO_MODELS.split("  - name: bert_model")[0]
    report = build_repository(_spec(tmp_path, only_llama), repo)
    assert [(c.name, c.status) for c in report.changes] == [
        ("llama_model", "unchanged"),
        ("bert_model", "removed"),
    ]
    assert not (repo / "bert_model").exists()
    assert (repo / "hand_made" / "config.pbtxt").exists()
    assert set(manifest_digests(repo)) == {"llama_model"}
    assert report.to_dict()["removed"] == ["bert_model"]


def test_hand_edited_folder_is_restored(tmp_path: Path) -> None:
    """An edit made inside REPO by hand differs from the spec, so the next build replaces it (updated)."""
    repo = tmp_path / "repo"
    build_repository(_spec(tmp_path, TWO_MODELS), repo)
    (repo / "llama_model" / "config.pbtxt").write_text('name: "llama_model"\nmax_batch_size: 1\n')
    (repo / "llama_model" / "1" / "stray.txt").write_text("x")
    report = build_repository(_spec(tmp_path, TWO_MODELS), repo)
    assert report.status("llama_model") == "updated"
    assert pbtxt.load(repo / "llama_model" / "config.pbtxt").max_batch_size == 8
    assert not (repo / "llama_model" / "1" / "stray.txt").exists()


def test_onnx_and_om_sources_are_copied_per_version(tmp_path: Path) -> None:
    """An .om with its ONNX lands in every version folder; versions > 1 get a specific version policy."""
    (tmp_path / "llama.onnx").write_bytes(demo_bytes("demo:llama"))
    (tmp_path / "llama.om").write_bytes(b"OM bytes")
    spec = _spec(
        tmp_path,
        """
        models:
          - {name: llm, backend: ge, source: llama.om, onnx: llama.onnx, versions: [1, 3], max_batch_size: 2}
          - name: native
            backend: npu_ge
            source: llama.onnx
            instance_group: {count: 2, device_ids: [4, 5]}
        """,
    )
    repo = tmp_path / "repo"
    build_repository(spec, repo)
    for version in ("1", "3"):
        assert (repo / "llm" / version / "model.om").read_bytes() == b"OM bytes"
        assert (repo / "llm" / version / "model.onnx").read_bytes() == demo_bytes("demo:llama")
    llm = pbtxt.load(repo / "llm" / "config.pbtxt")
    assert list(llm.version_policy.specific.versions) == [1, 3]
    assert llm.parameters["om_model_path"].string_value == "model.om"
    native = pbtxt.load(repo / "native" / "config.pbtxt")
    assert native.backend == "npu_ge" and "om_model_path" not in native.parameters
    assert native.parameters["device_ids"].string_value == "4,5"
    assert [(g.count, g.kind) for g in native.instance_group] == [(2, native.instance_group[0].KIND_CPU)]
    assert sorted(p.name for p in (repo / "native" / "1").iterdir()) == ["model.onnx"]


def test_missing_source_leaves_the_old_repository(tmp_path: Path) -> None:
    """A source file deleted after the spec was read fails the build; REPO is untouched, no staging left."""
    (tmp_path / "llama.onnx").write_bytes(demo_bytes("demo:llama"))
    repo = tmp_path / "repo"
    build_repository(_spec(tmp_path, TWO_MODELS), repo)
    before = snapshot(repo)
    spec = _spec(tmp_path, TWO_MODELS + "  - {name: extra, backend: ge, source: llama.onnx}\n")
    (tmp_path / "llama.onnx").unlink()
    with pytest.raises(BuildError, match=r"model 'extra': cannot read .*llama\.onnx: No such file"):
        build_repository(spec, repo)
    assert snapshot(repo) == before
    assert not leftovers(tmp_path)


def test_unsafe_model_name_never_writes_outside(tmp_path: Path) -> None:
    """A programmatic spec with a path-like name is refused before anything is written."""
    repo = tmp_path / "inner" / "repo"
    bad = ModelSpec(name="../escaped", backend="ge", source="demo:bert", onnx_path=None, om_path=None)
    with pytest.raises(BuildError, match=r"model name '\.\./escaped' must not contain a path separator"):
        build_repository(DeploymentSpec("x", None, ServerSpec(), (bad,)), repo)
    assert not (tmp_path / "inner").exists() or not any((tmp_path / "inner").iterdir())
    assert not (tmp_path / "escaped").exists()


def test_output_that_is_a_file_is_refused(tmp_path: Path) -> None:
    """-o pointing at a file is an error, and the file is kept."""
    target = tmp_path / "repo"
    target.write_text("keep me")
    with pytest.raises(BuildError, match="exists and is not a directory"):
        build_demo_repository(target)
    assert target.read_text() == "keep me"


def _limited_file_size() -> None:
    """Child-process hook: files larger than 1 MiB cannot be written (EFBIG, like a full disk)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))


def test_disk_error_while_staging_leaves_the_old_repository(tmp_path: Path) -> None:
    """A write error (file size limit) in the middle of a build: exit 1, REPO as before, no staging left."""
    repo = tmp_path / "repo"
    spec_path = tmp_path / "deploy.yaml"
    spec_path.write_text(TWO_MODELS.split("  - name: bert_model")[0], encoding="utf-8")
    build_repository(load_spec(spec_path), repo)
    before = snapshot(repo)
    spec_path.write_text(TWO_MODELS.replace("max_batch_size: 8", "max_batch_size: 2"), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "triton_ge_console.cli", "build", str(spec_path), "-o", str(repo)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limited_file_size,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "File too large" in result.stderr and "the repository is unchanged" in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(repo) == before
    assert not leftovers(tmp_path)


def test_build_report_json_and_lines(tmp_path: Path) -> None:
    """The report serializes to JSON with per-model status and digest, and prints a summary."""
    report = build_demo_repository(tmp_path / "repo")
    data = json.loads(json.dumps(report.to_dict()))
    assert data["added"] == ["llama_model", "bert_model"]
    assert [m["status"] for m in data["models"]] == ["added", "added"]
    assert all(len(m["digest"]) == 64 for m in data["models"])
    assert report.lines()[-1].endswith("2 added, 0 updated, 0 unchanged, 0 removed")


def _blocked_flock_waiters(folder: Path) -> int:
    """How many processes wait in flock() on folder (/proc/locks lists waiters with '->')."""
    inode = folder.stat().st_ino
    lines = Path("/proc/locks").read_text().splitlines()
    return sum(
        1 for line in lines if "->" in line and "FLOCK" in line and line.split()[-3].endswith(f":{inode}")
    )


def test_a_second_build_waits_for_the_first(tmp_path: Path) -> None:
    """While one build holds REPO's lock, another process waits in flock, then completes consistently."""
    from triton_ge_console.repository.build_commit import build_lock

    spec_path = tmp_path / "deploy.yaml"
    spec_path.write_text(TWO_MODELS, encoding="utf-8")
    repo = tmp_path / "repo"
    command = [sys.executable, "-m", "triton_ge_console.cli", "build", str(spec_path), "-o", str(repo)]
    with build_lock(repo):
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: _blocked_flock_waiters(tmp_path) or child.poll() is not None, 60)
            assert child.poll() is None, child.communicate()
            assert _blocked_flock_waiters(tmp_path) == 1
            assert not repo.exists()
        except BaseException:
            child.kill()
            raise
    _, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert all(folder_digest(repo / name) == digest for name, digest in manifest_digests(repo).items())
    assert not leftovers(tmp_path)
