"""The build's swap (issue 14): no moment where a model folder is missing, stale staging folders cleaned."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.repository.test_build import _blocked_flock_waiters
from tests.waiting import wait_until
from triton_ge_console.repository.build import build_repository, folder_digest, manifest_digests
from triton_ge_console.repository.build_commit import build_lock, staging_dir
from triton_ge_console.repository.spec.load import load_spec

SPEC = """
models:
  - name: first
    backend: ge
    source: demo:bert
    max_batch_size: {batch}
  - name: second
    backend: ge
    source: demo:bert
    max_batch_size: {batch}
"""

# Polls the model folders as a Triton repository poll would, until told to stop; prints what it saw missing.
READER = textwrap.dedent("""
    import os, sys
    repo, stop = sys.argv[1], sys.argv[2]
    missing, looks = set(), 0
    print("ready", flush=True)
    while not os.path.exists(stop):
        for name in ("first", "second"):
            looks += 1
            if not os.path.isfile(os.path.join(repo, name, "config.pbtxt")):
                missing.add(name)
    print(looks, " ".join(sorted(missing)), flush=True)
""")


def _write_spec(path: Path, batch: int) -> Path:
    path.write_text(SPEC.format(batch=batch), encoding="utf-8")
    return path


def test_a_reader_never_sees_a_model_folder_missing_during_rebuilds(tmp_path: Path) -> None:
    repo, stop = tmp_path / "repo", tmp_path / "stop"
    spec_path = _write_spec(tmp_path / "deploy.yaml", 2)
    build_repository(load_spec(spec_path), repo)
    reader = subprocess.Popen([sys.executable, "-c", READER, str(repo), str(stop)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "ready"
        for round_ in range(40):
            report = build_repository(load_spec(_write_spec(spec_path, 4 - round_ % 2 * 2)), repo)
            assert report.names("updated") == ("first", "second")
    finally:
        stop.touch()
        out, _ = reader.communicate(timeout=60)
    looks, _, missing = out.strip().partition(" ")
    assert int(looks) > 1000 and missing == "", f"missing during a rebuild: {missing}"
    assert all(folder_digest(repo / name) == digest for name, digest in manifest_digests(repo).items())


def _killed_build(repo: Path) -> None:
    """A build process killed while it staged: its staging folder stays behind."""
    code = ("import os, signal, sys; from pathlib import Path; "
            "from triton_ge_console.repository.build_commit import staging_dir; "
            "folder = staging_dir(Path(sys.argv[1])); (folder / 'new').mkdir(); "
            "os.kill(os.getpid(), signal.SIGKILL)")
    result = subprocess.run([sys.executable, "-c", code, str(repo)], check=False, timeout=60)
    assert result.returncode == -9


def test_a_later_build_removes_what_a_killed_build_left_but_never_a_running_builds(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    spec_path = _write_spec(tmp_path / "deploy.yaml", 2)
    _killed_build(repo)
    stale = [p for p in tmp_path.iterdir() if ".ge-build-" in p.name]
    assert len(stale) == 1
    other = tmp_path / "other"
    _killed_build(other)  # another repository's leftovers beside this one: its own builds clean them
    build_repository(load_spec(spec_path), repo)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".repo.ge-build-")] == []
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".other.ge-build-")]
    with build_lock(repo):  # a build that is running now: its staging folder exists while it holds the lock
        running = staging_dir(repo)
        command = [sys.executable, "-m", "triton_ge_console.cli", "build", str(spec_path), "-o", str(repo)]
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: _blocked_flock_waiters(tmp_path) == 1 or child.poll() is not None, 60)
            assert child.poll() is None, child.communicate()
        except BaseException:
            child.kill()
            raise
        assert running.is_dir()
        running.rmdir()
    _, err = child.communicate(timeout=120)
    assert child.returncode == 0, err


def test_without_an_atomic_exchange_the_swap_still_moves_each_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No RENAME_EXCHANGE (some filesystems): each old folder is moved aside right before its new one."""
    from triton_ge_console.repository import build_commit

    repo = tmp_path / "repo"
    spec_path = _write_spec(tmp_path / "deploy.yaml", 2)
    build_repository(load_spec(spec_path), repo)
    monkeypatch.setattr(build_commit, "exchange", lambda _first, _second: False)
    report = build_repository(load_spec(_write_spec(spec_path, 4)), repo)
    assert report.names("updated") == ("first", "second")
    assert "max_batch_size: 4" in (repo / "first" / "config.pbtxt").read_text()
    assert all(folder_digest(repo / name) == digest for name, digest in manifest_digests(repo).items())
    assert not [p for p in tmp_path.iterdir() if ".ge-build-" in p.name]


def test_a_failure_after_the_swaps_puts_every_model_folder_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest cannot be written last: every folder is exchanged back (REPO's own mtime aside)."""
    from tests.repository.test_build import snapshot
    from triton_ge_console.repository import build_commit
    from triton_ge_console.repository.build import BuildError

    repo = tmp_path / "repo"
    spec_path = _write_spec(tmp_path / "deploy.yaml", 2)
    build_repository(load_spec(spec_path), repo)
    before = snapshot(repo)
    real_replace = os.replace

    def failing_manifest(source: object, target: object) -> None:
        if str(target).endswith(".ge-console-build.json"):
            raise OSError(28, "No space left on device", str(target))
        real_replace(source, target)  # type: ignore[arg-type]

    monkeypatch.setattr(build_commit.os, "replace", failing_manifest)
    with pytest.raises(BuildError, match="No space left on device"):
        build_repository(load_spec(_write_spec(spec_path, 4)), repo)
    after = snapshot(repo)
    assert {k: v for k, v in after.items() if k != "."} == {k: v for k, v in before.items() if k != "."}
