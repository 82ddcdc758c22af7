"""Big settled model files stand in a build's digests by their identity (device, inode, size, mtime_ns):
a cold build, linked or copied, reads none of their bytes, and still sees every replacement or write."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from tests.models import age, save_external
from triton_ge_console.repository import digest_cache
from triton_ge_console.repository.build import build_repository, folder_digest
from triton_ge_console.repository.spec.load import load_spec

SPEC = "models:\n  - {name: m, backend: ge, source: m.onnx, max_batch_size: 4, versions: [1, 2]}\n"


@pytest.fixture
def big(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with m.onnx whose weights file is padded (sparse) to IDENTITY_MIN bytes, aged, and a spec;
    the digest cache empty (its own folder)."""
    monkeypatch.setenv("GE_CONSOLE_CACHE_DIR", str(tmp_path / "cache"))
    save_external(tmp_path / "m.onnx", location="m.data")
    os.truncate(tmp_path / "m.data", digest_cache.IDENTITY_MIN)  # bytes past the tensors' end are allowed
    age(tmp_path / "m.onnx", tmp_path / "m.data")
    (tmp_path / "deploy.yaml").write_text(SPEC, encoding="utf-8")
    return tmp_path


def _build(folder: Path, link: bool) -> tuple[int, str]:
    """Build the folder's spec into folder/repo: (model bytes hashed, status of m)."""
    start = digest_cache.bytes_hashed
    report = build_repository(load_spec(folder / "deploy.yaml"), folder / "repo", link=link)
    return digest_cache.bytes_hashed - start, report.status("m") or ""


def _small_bytes(folder: Path) -> int:
    """The bytes a build still hashes: the small ONNX, once (its versions share it)."""
    return (folder / "m.onnx").stat().st_size


@pytest.mark.parametrize("link", [True, False])
def test_a_cold_build_reads_none_of_the_big_file_and_a_rebuild_sees_nothing_changed(
    big: Path, link: bool
) -> None:
    """Linked or copied, the weights are placed unread; the rebuild (a fresh view of the cache) agrees."""
    assert _build(big, link) == (_small_bytes(big), "added")
    served = big / "repo" / "m" / "1" / "m.data"
    assert (served.stat().st_ino == (big / "m.data").stat().st_ino) is link
    digest_cache._loaded_from = None  # as a new process: only the cache file on disk
    assert _build(big, link) == (0, "unchanged")


@pytest.mark.parametrize("link", [True, False])
def test_a_replaced_or_rewritten_source_is_an_update_and_the_served_file_keeps_its_bytes(
    big: Path, link: bool
) -> None:
    """A source replaced by a new file (new inode) is updated without reading it, and the file served
    before keeps its bytes; a write into the source (its mtime moves) changes the folder's digest."""
    _build(big, link)
    served = big / "repo" / "m" / "1" / "m.data"
    kept = big / "kept"
    os.link(served, kept)
    before = hashlib.sha256(kept.read_bytes()).hexdigest()
    shutil.copyfile(big / "m.data", big / "new.data")
    with open(big / "new.data", "r+b") as stream:
        stream.write(b"\x01" * 64)  # other weights, same size
    age(big / "new.data")
    os.replace(big / "new.data", big / "m.data")
    assert _build(big, link) == (0, "updated")
    assert hashlib.sha256(kept.read_bytes()).hexdigest() == before
    assert served.read_bytes()[:64] == b"\x01" * 64
    loaded = folder_digest(big / "repo" / "m")
    os.utime(big / "m.data", ns=(2 * 10**18 - 1, 2 * 10**18 - 1))  # as a write in place would move it
    # linked, the repository holds the written file already (unchanged), yet its folder digest moved, so
    # `reload --changed` reloads it; copied, the build places a new copy
    assert _build(big, link)[1] == ("unchanged" if link else "updated")
    assert folder_digest(big / "repo" / "m") != loaded


def test_a_lost_cache_costs_a_linked_repository_nothing(big: Path) -> None:
    """A linked file has its source's identity, so with the digest cache gone the folder's digest still
    matches the plan: unchanged, and no byte of the weights read."""
    _build(big, link=True)
    shutil.rmtree(big / "cache")
    digest_cache._loaded_from = None
    digest_cache._memory.clear()
    hashed, status = _build(big, link=True)
    assert status == "unchanged" and hashed < 10_000  # the small files only (the ONNX, the config)


def test_a_source_written_in_the_last_two_seconds_is_hashed(big: Path) -> None:
    """Its mtime may not move again at the next write, so its identity cannot stand for its content."""
    os.utime(big / "m.data")  # now
    hashed, status = _build(big, link=True)
    assert status == "added" and hashed == _small_bytes(big) + digest_cache.IDENTITY_MIN


def test_a_source_changed_while_copied_gets_the_hash_of_what_was_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The digest is read before the copy; if the source changes meanwhile, the copy itself is hashed."""
    monkeypatch.setenv("GE_CONSOLE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(digest_cache, "IDENTITY_MIN", 1)
    source, target = tmp_path / "w.bin", tmp_path / "copy.bin"
    source.write_bytes(b"old" * 1000)
    age(source)

    def copy_after_an_edit(a: Path, b: Path) -> None:
        with open(a, "ab") as stream:
            stream.write(b"new")
        shutil.copyfile(a, b)

    assert digest_cache.copy_identified(source, target, shutil.copyfile) == digest_cache.file_digest(source)
    target.unlink()
    digest = digest_cache.copy_identified(source, target, copy_after_an_edit)
    assert digest == hashlib.sha256(b"old" * 1000 + b"new").hexdigest()


def test_the_folder_digest_of_a_linked_model_is_its_sources_identity(big: Path) -> None:
    """What `reload --changed` compares: the repository folder's digest equals the build's."""
    _build(big, link=True)
    manifest = (big / "repo" / ".ge-console-build.json").read_text(encoding="utf-8")
    assert folder_digest(big / "repo" / "m") is not None
    assert f'"digest": "{folder_digest(big / "repo" / "m")}"' in manifest
