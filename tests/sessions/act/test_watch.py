"""What `watch` follows and how a model folder's content is fingerprinted (no server needed)."""

from __future__ import annotations

from pathlib import Path

from triton_ge_console.repository.build import build_repository, manifest_digests
from triton_ge_console.repository.demo_models import demo_bytes
from triton_ge_console.repository.spec.load import load_spec
from triton_ge_console.sessions.act.digests import model_digest
from triton_ge_console.sessions.act.watch import watched_files

SPEC = """\
name: files
models:
  - name: bert_model
    backend: ge
    source: models/bert.onnx
    max_batch_size: 4
"""


def write_file_spec(folder: Path) -> Path:
    """A spec whose model comes from an ONNX file beside it."""
    (folder / "models").mkdir(parents=True)
    (folder / "models" / "bert.onnx").write_bytes(demo_bytes("demo:bert"))
    spec = folder / "deploy.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    return spec


def test_watch_follows_the_spec_and_its_model_sources(tmp_path: Path) -> None:
    spec = write_file_spec(tmp_path)
    assert watched_files(spec) == {spec.resolve(), (tmp_path / "models" / "bert.onnx").resolve()}


def test_a_broken_spec_is_still_watched_for_its_fix(tmp_path: Path) -> None:
    spec = write_file_spec(tmp_path)
    spec.write_text("models: [", encoding="utf-8")
    assert watched_files(spec) == {spec.resolve()}


def test_model_digest_matches_the_builder_and_ignores_bytecode_caches(tmp_path: Path) -> None:
    spec = write_file_spec(tmp_path / "spec")
    repository = build_repository(load_spec(spec), tmp_path / "repo").repository
    folder = repository / "bert_model"
    built = model_digest(folder)
    assert built == manifest_digests(repository)["bert_model"]
    (folder / "1" / "__pycache__").mkdir()
    (folder / "1" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\0")
    assert model_digest(folder) == built
    (folder / "config.pbtxt").write_text((folder / "config.pbtxt").read_text() + "\n", encoding="utf-8")
    assert model_digest(folder) != built
    assert model_digest(tmp_path / "missing") is None
