"""External-data ONNX models: brought along by build (linked or copied, and said), validated at the tensor
that names a bad file, and no model byte read again by a no-op rebuild or `reload --changed`."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.models import age, save_external, set_external_location
from triton_ge_console.model_files import onnx_io
from triton_ge_console.repository import digest_cache
from triton_ge_console.repository.build import BuildError, build_repository
from triton_ge_console.repository.progress import TerminalProgress
from triton_ge_console.repository.spec.load import SpecError, load_spec
from triton_ge_console.repository.validate import validate_path
from triton_ge_console.sessions.act.changes import find_changes
from triton_ge_console.sessions.act.digests import record_loaded_digests
from triton_ge_console.sessions.act.watch import watched_files
from triton_ge_console.sessions.server.registry import SessionRecord

ROOT = Path(__file__).resolve().parents[2]
SPEC = """
models:
  - name: one_file
    backend: ge
    source: one.onnx
    max_batch_size: 4
  - name: several
    backend: npu_ge
    source: several/net.onnx
    max_batch_size: 4
"""


def _write_spec(folder: Path, text: str = SPEC) -> Path:
    """A spec file in folder."""
    path = folder / "deploy.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    """A folder with one.onnx (weights in weights/one.data) and several/net.onnx (a file per tensor)."""
    save_external(tmp_path / "one.onnx", location="weights/one.data")
    (tmp_path / "several").mkdir()
    save_external(tmp_path / "several" / "net.onnx", one_file=False, seed=1)
    age(*[p for p in tmp_path.rglob("*") if p.is_file()])
    _write_spec(tmp_path)
    return tmp_path


def _sha(path: Path) -> str:
    """A file's sha256."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_build_links_the_onnx_and_every_external_data_file(sources: Path) -> None:
    """Within one filesystem every model file is a hard link to its source, at the path the ONNX expects."""
    repo = sources / "repo"
    report = build_repository(load_spec(sources / "deploy.yaml"), repo)
    pairs = [("one_file/1/model.onnx", "one.onnx"), ("one_file/1/weights/one.data", "weights/one.data")]
    pairs += [(f"several/1/w{i}", f"several/w{i}") for i in range(4)]
    for built, source in pairs:
        assert (repo / built).stat().st_ino == (sources / source).stat().st_ino, built
    assert report.lines()[:2] == [
        "added      one_file  (2 files linked)",
        "added      several  (5 files linked)",
    ]
    assert report.to_dict()["models"][1]["linked"] == 5
    assert validate_path(repo).ok, [str(p) for p in validate_path(repo).problems]


@pytest.fixture
def other_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A private folder on another filesystem than tmp_path (tmpfs /dev/shm), removed afterwards."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second filesystem here")
    folder = shm / f"ge-test-extdata-{os.getpid()}-{tmp_path.name}"
    folder.mkdir()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_across_filesystems_build_copies_and_says_why(sources: Path, other_filesystem: Path) -> None:
    """Sources on another filesystem are copied (same bytes, another inode) and the report says why."""
    repo = other_filesystem / "repo"
    report = build_repository(load_spec(sources / "deploy.yaml"), repo)
    built, source = repo / "one_file" / "1" / "weights" / "one.data", sources / "weights" / "one.data"
    assert _sha(built) == _sha(source) and built.stat().st_ino != source.stat().st_ino
    assert report.lines()[0] == "added      one_file  (2 files copied: the source is on another filesystem)"
    assert report.to_dict()["models"][0]["why_copied"] == "the source is on another filesystem"


def test_copy_flag_copies_and_prints_nothing_but_the_lines_on_a_pipe(sources: Path) -> None:
    """`build --copy` copies; on a pipe stderr stays empty (no progress) and stdout has the final lines."""
    repo = sources / "repo"
    result = subprocess.run(
        [sys.executable, "-m", "triton_ge_console.cli", "build", str(sources / "deploy.yaml"),
         "-o", str(repo), "--copy"], capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "added      one_file  (2 files copied: linking is off (--copy))" in result.stdout.splitlines()
    assert (repo / "one_file/1/model.onnx").stat().st_ino != (sources / "one.onnx").stat().st_ino


def test_config_only_edit_links_the_served_weights_and_never_writes_them(sources: Path) -> None:
    """A config edit on a copied build links the unchanged weights from the served folder; a source
    replaced afterwards lands as a new file, and the file the old version served keeps its bytes."""
    repo = sources / "repo"
    spec_path = sources / "deploy.yaml"
    build_repository(load_spec(spec_path), repo, link=False)
    served = repo / "one_file" / "1" / "weights" / "one.data"
    kept = sources / "kept-link"
    os.link(served, kept)  # outlives the swap, so we can look at what was served
    before = _sha(kept)
    _write_spec(sources, SPEC.replace("4\n  - name: several", "2\n  - name: several"))
    report = build_repository(load_spec(spec_path), repo, link=False)
    assert report.status("one_file") == "updated"
    assert served.stat().st_ino == kept.stat().st_ino  # linked from the old folder, not copied
    save_external(sources / "new.onnx", location="weights/one.data.new", seed=9)
    os.replace(sources / "weights" / "one.data.new", sources / "weights" / "one.data")  # a new file
    set_external_location(sources / "new.onnx", "weights/one.data")
    os.replace(sources / "new.onnx", sources / "one.onnx")
    assert build_repository(load_spec(spec_path), repo, link=False).status("one_file") == "updated"
    assert _sha(kept) == before and _sha(served) == _sha(sources / "weights" / "one.data") != before


def _bytes_hashed_by_build(spec: Path, repo: Path) -> tuple[int, list[str]]:
    """Model bytes a fresh process hashes building spec into repo, and the build's lines."""
    code = (
        "import sys; from pathlib import Path\n"
        "from triton_ge_console.repository import digest_cache\n"
        "from triton_ge_console.repository.build import build_repository\n"
        "from triton_ge_console.repository.spec.load import load_spec\n"
        "r = build_repository(load_spec(Path(sys.argv[1])), Path(sys.argv[2]))\n"
        "print(digest_cache.bytes_hashed); print(*r.lines(), sep='\\n')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(spec), str(repo)], capture_output=True, text=True,
        timeout=120, check=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    first, *lines = result.stdout.splitlines()
    return int(first), lines


def test_a_cold_copied_build_hashes_each_model_byte_once(sources: Path) -> None:
    """Copying a model new to REPO hashes it while copying: bytes hashed = bytes copied, no more."""
    start = digest_cache.bytes_hashed
    report = build_repository(load_spec(sources / "deploy.yaml"), sources / "repo", link=False)
    total = sum(p.stat().st_size for p in sources.rglob("*") if p.is_file() and p.suffix != ".yaml"
                and "repo" not in p.parts)
    assert digest_cache.bytes_hashed - start == total
    assert report.lines()[0] == "added      one_file  (2 files copied: linking is off (--copy))"
    assert not [p for p in sources.iterdir() if p.name.startswith(".repo.")]  # nothing left beside REPO


def test_no_op_rebuild_and_reload_changed_read_no_model_bytes(sources: Path) -> None:
    """The first build hashes every model byte once; a rebuild in a new process and `reload --changed`'s
    look at the repository hash none (the digest cache answers from size, mtime and inode)."""
    repo = sources / "repo"
    total = sum(p.stat().st_size for p in sources.rglob("*") if p.is_file() and p.suffix != ".yaml")
    first, _ = _bytes_hashed_by_build(sources / "deploy.yaml", repo)
    assert first >= total
    again, lines = _bytes_hashed_by_build(sources / "deploy.yaml", repo)
    assert again == 0 and lines[:2] == ["unchanged  one_file", "unchanged  several"]
    session = sources / "session"
    session.mkdir()
    record = SessionRecord(
        name="s", pid=None, started_at=0.0, http_url="", grpc_url=None, metrics_url=None, repository=repo,
        spec=None, backend_dir=None, log_path=None, token_ref=None, attached=False, session_dir=session,
        models=("one_file", "several"),
    )
    record_loaded_digests(record)
    digest_cache._loaded_from = None  # as a new process: only the cache file on disk
    start = digest_cache.bytes_hashed
    assert find_changes(record).empty
    assert digest_cache.bytes_hashed == start


def test_a_fresh_source_is_hashed_again_until_it_is_old_enough(tmp_path: Path) -> None:
    """A file modified within the clock tick could keep size and mtime: it is not remembered yet."""
    path = tmp_path / "w.bin"
    path.write_bytes(b"x" * 1000)
    start = digest_cache.bytes_hashed
    digest_cache.file_sha256(path)
    digest_cache.file_sha256(path)
    assert digest_cache.bytes_hashed - start == 2000
    age(path)
    digest_cache.file_sha256(path)
    digest_cache.file_sha256(path)
    assert digest_cache.bytes_hashed - start == 3000


def _problems(spec_path: Path) -> list[str]:
    """The spec's problems, as printed."""
    with pytest.raises(SpecError) as caught:
        load_spec(spec_path)
    return [str(p) for p in caught.value.problems]


def test_spec_reports_missing_short_and_escaping_external_data_at_its_tensor(sources: Path) -> None:
    """Each bad external-data file is an error at the model's source line, naming file and tensor."""
    spec_path = sources / "deploy.yaml"
    (sources / "several" / "w2").unlink()
    with open(sources / "weights" / "one.data", "r+b") as stream:
        stream.truncate(100_000)
    problems = _problems(spec_path)
    assert any(f"deploy.yaml:5:13 models[0].source: {sources}/one.onnx: tensor 'w0': external data "
               "'weights/one.data' is too short: 100000 bytes, the tensor needs bytes 0..262144" in p
               for p in problems), problems
    assert any("tensor 'w1': external data 'weights/one.data' is too short" in p for p in problems)
    assert any(f"deploy.yaml:9:13 models[1].source: {sources}/several/net.onnx: tensor 'w2': external data "
               f"'w2' is missing (no file {sources}/several/w2)" in p for p in problems), problems
    set_external_location(sources / "several" / "net.onnx", "../weights/one.data")
    assert any("tensor 'w0': external data '../weights/one.data' is outside the model's folder" in p
               for p in _problems(spec_path))


def test_repository_validate_reports_a_short_data_file_at_its_tensor(sources: Path) -> None:
    """`validate REPO` names the config, the ONNX and the tensor; build refuses a programmatic bad spec."""
    repo = sources / "repo"
    spec = load_spec(sources / "deploy.yaml")
    build_repository(spec, repo, link=False)
    with open(repo / "several" / "1" / "w3", "r+b") as stream:
        stream.truncate(10)
    errors = [str(p) for p in validate_path(repo).errors]
    assert errors == [f"{repo}/several/config.pbtxt: {repo}/several/1/model.onnx: tensor 'w3': external data "
                      "'w3' is too short: 10 bytes, the tensor needs bytes 0..262144"]
    (sources / "several" / "w3").unlink()
    with pytest.raises(BuildError, match=r"model 'several': .*tensor 'w3': external data 'w3' is missing"):
        build_repository(spec, repo)


def test_reading_inputs_and_outputs_loads_no_weights(sources: Path) -> None:
    """The graph's I/O is read with the weights gone: the data files are never opened."""
    (sources / "weights" / "one.data").unlink()
    inputs, outputs = onnx_io.read_onnx_io(sources / "one.onnx")
    assert [(t.name, t.dims) for t in (*inputs, *outputs)] == [("x", (-1, 256)), ("y", (-1, 256))]


def test_progress_hook_sees_copying_and_hashing_to_the_end(
    sources: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook a console or notebook passes hears each file's work, ending at its size: a cold copied
    build reports its copies, a linked one (with nothing remembered) its hashing."""
    size = (sources / "weights" / "one.data").stat().st_size
    for link, what in ((False, "copying one_file/1/weights/one.data"), (True, "hashing one.data")):
        monkeypatch.setenv("GE_CONSOLE_CACHE_DIR", str(tmp_path_factory.mktemp("cold-cache")))
        seen: dict[str, tuple[int, int]] = {}
        build_repository(load_spec(sources / "deploy.yaml"), sources / f"repo-{link}", link=link,
                         progress=lambda what, done, total: seen.__setitem__(what, (done, total)))  # noqa: B023
        assert seen[what] == (size, size), seen


class _Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_terminal_progress_draws_only_on_a_terminal_and_after_the_delay() -> None:
    """A task younger than the delay draws nothing; on a terminal an older one draws a bar."""
    pipe = io.StringIO()
    quiet = TerminalProgress(pipe, show_after_s=0)
    quiet("copying big.data", 50, 100)
    quiet.close()
    assert pipe.getvalue() == ""
    screen = _Terminal()
    waiting = TerminalProgress(screen, show_after_s=3600)
    waiting("copying big.data", 50, 100)
    waiting.close()
    assert screen.getvalue() == ""
    drawing = TerminalProgress(screen, show_after_s=0)
    drawing("copying big.data", 100, 100)
    drawing.close()
    assert "copying big.data" in screen.getvalue()


def test_json_report_says_how_files_were_placed(sources: Path) -> None:
    """`build --json` carries linked / copied counts per model."""
    report = build_repository(load_spec(sources / "deploy.yaml"), sources / "r")
    data = json.loads(json.dumps(report.to_dict()))
    assert [(m["linked"], m["copied"]) for m in data["models"]] == [(2, 0), (5, 0)]


def test_an_om_source_brings_its_emulation_onnx_and_that_onnx_s_weights(sources: Path) -> None:
    """`source: x.om` + `onnx:` links the OM, the ONNX and its data files into each version folder."""
    (sources / "net.om").write_bytes(b"OM bytes")
    model = "{name: m, backend: ge, source: net.om, onnx: one.onnx, versions: [1, 2]}"
    _write_spec(sources, f"models:\n  - {model}\n")
    report = build_repository(load_spec(sources / "deploy.yaml"), sources / "repo")
    for version in ("1", "2"):
        folder = sources / "repo" / "m" / version
        assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
            "model.om", "model.onnx", "weights/one.data"]
        assert (folder / "weights" / "one.data").stat().st_ino == (sources / "weights/one.data").stat().st_ino
    assert report.lines()[0] == "added      m  (6 files linked)"


def test_watch_follows_the_external_data_files_too(sources: Path) -> None:
    """`watch` rebuilds when a weights file is replaced, not only the ONNX or the spec."""
    files = watched_files(sources / "deploy.yaml")
    assert (sources / "weights" / "one.data").resolve() in files
    assert {(sources / "several" / f"w{i}").resolve() for i in range(4)} <= files


def test_a_long_running_process_sees_hashes_another_process_saved(tmp_path: Path) -> None:
    """The console or `watch` keeps running while `ge-console build` hashes: its hashes are used."""
    first, second = tmp_path / "a.bin", tmp_path / "b.bin"
    first.write_bytes(b"a" * 5000)
    second.write_bytes(b"b" * 7000)
    age(first, second)
    digest_cache.file_sha256(first)  # this process has read the cache file
    code = (
        "import sys; from pathlib import Path; from triton_ge_console.repository import digest_cache as d; "
        "d.file_sha256(Path(sys.argv[1]))"
    )
    subprocess.run([sys.executable, "-c", code, str(second)], check=True, timeout=60,
                   env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    start = digest_cache.bytes_hashed
    assert digest_cache.file_sha256(second) == hashlib.sha256(b"b" * 7000).hexdigest()
    assert digest_cache.bytes_hashed == start


def test_copied_versions_share_one_copy_of_the_weights(sources: Path) -> None:
    """Copying (--copy, or another filesystem), version 2 links the copy made for version 1: not twice."""
    _write_spec(sources, "models:\n  - {name: m, backend: ge, source: one.onnx, versions: [1, 2]}\n")
    report = build_repository(load_spec(sources / "deploy.yaml"), sources / "repo", link=False)
    first, second = (sources / "repo" / "m" / v / "weights" / "one.data" for v in ("1", "2"))
    assert first.stat().st_ino == second.stat().st_ino != (sources / "weights" / "one.data").stat().st_ino
    assert report.lines()[0] == "added      m  (2 files linked, 2 files copied: linking is off (--copy))"


def test_terminal_progress_shows_a_wait_with_its_elapsed_time_on_a_terminal_only() -> None:
    """Work with no measure (Triton loading) draws its name and elapsed time once old enough, not before,
    and nothing on a pipe; finish() ends it."""
    pipe = io.StringIO()
    quiet = TerminalProgress(pipe, show_after_s=0)
    quiet.elapsed("loading big", 5.0)
    quiet.close()
    assert pipe.getvalue() == ""
    screen = _Terminal()
    terminal = TerminalProgress(screen, show_after_s=1.0)
    terminal.elapsed("loading big", 0.5)
    assert screen.getvalue() == ""
    terminal.elapsed("loading big", 1.5)
    terminal.finish("loading big")
    terminal.close()
    assert "loading big" in screen.getvalue() and "0:00:0" in screen.getvalue()


def _link_weights_to(sources: Path, target: Path) -> Path:
    """one.onnx's weights file replaced by a symlink to target (the ONNX still names weights/one.data)."""
    weights = sources / "weights" / "one.data"
    weights.unlink()
    weights.symlink_to(target)
    return weights


@pytest.mark.parametrize("target", ["secret", "/proc/self/environ"])
def test_external_data_linked_out_of_the_model_folder_is_refused_naming_where_it_points(
        sources: Path, tmp_path_factory: pytest.TempPathFactory, target: str) -> None:
    """A data file that is a link out of the source folder (a secret elsewhere, /proc/self/environ whose
    size reads 0) is refused when the spec is read, for build, naming the file and where it points; it
    used to build ("2 files linked", or a 0-byte copy) and validate ok."""
    real = tmp_path_factory.mktemp("elsewhere") / target if target == "secret" else Path(target)
    if target == "secret":
        real.write_bytes(b"\0" * 4 * 262144)  # long enough: the link alone is what is wrong
    set_external_location(sources / "one.onnx", "weights/one.data", keep_lengths=False)
    _link_weights_to(sources, real)
    problems = _problems(sources / "deploy.yaml")
    assert any(f"deploy.yaml:5:13 models[0].source: {sources}/one.onnx: tensor 'w0': external data "
               f"'weights/one.data' is a link to {os.path.realpath(real)}, outside the model's folder "
               f"{sources}: copy the file into the folder instead" in p for p in problems), problems


def test_validate_refuses_external_data_linked_out_of_the_model_folder(
        sources: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """In a repository a data file may be a link within its model's folder (Triton's), not out of it."""
    repo = sources / "repo"
    build_repository(load_spec(sources / "deploy.yaml"), repo, link=False)
    shared = repo / "several" / "shared"
    shared.mkdir()
    (repo / "several" / "1" / "w3").rename(shared / "w3")
    (repo / "several" / "1" / "w3").symlink_to(shared / "w3")
    assert not validate_path(repo).errors
    secret = tmp_path_factory.mktemp("elsewhere") / "secret"
    (shared / "w3").rename(secret)
    (repo / "several" / "1" / "w3").unlink()
    (repo / "several" / "1" / "w3").symlink_to(secret)
    errors = [str(p) for p in validate_path(repo).errors]
    assert errors == [f"{repo}/several/config.pbtxt: {repo}/several/1/model.onnx: tensor 'w3': external data "
                      f"'w3' is a link to {secret}, outside the model's folder {repo}/several: "
                      "copy the file into the folder instead"]


def test_validate_warns_where_onnx_runtime_refuses_a_link_within_the_model_folder(sources: Path) -> None:
    """A data file linked elsewhere in its model's folder stays inside the model (no error), but ONNX
    Runtime (1.24 on) loads only files under the ONNX's own folder, links followed: CPU emulation would
    fail at load, so validate says so where it is (it said ok); a link within the ONNX's folder is fine."""
    repo = sources / "repo"
    build_repository(load_spec(sources / "deploy.yaml"), repo, link=False)
    (repo / "several" / "1" / "w2").rename(repo / "several" / "1" / "w2.real")
    (repo / "several" / "1" / "w2").symlink_to("w2.real")
    shared = repo / "several" / "shared"
    shared.mkdir()
    (repo / "several" / "1" / "w3").rename(shared / "w3")
    (repo / "several" / "1" / "w3").symlink_to(shared / "w3")
    report = validate_path(repo)
    assert report.errors == ()
    said = [str(p) for p in report.warnings if "ONNX Runtime" in p.message]
    assert said == [f"{repo}/several/config.pbtxt: warning: {repo}/several/1/model.onnx: tensor 'w3': "
                    f"external data 'w3' is a link to {shared / 'w3'}, outside the ONNX's folder "
                    f"{repo}/several/1: ONNX Runtime 1.24 and later refuse to load it ('External data path "
                    "escapes model directory', its tensorprotoutils.cc ValidateExternalDataPath), so CPU "
                    "emulation would fail: keep the file beside the ONNX"]
    import onnxruntime as ort

    if tuple(int(part) for part in ort.__version__.split(".")[:2]) >= (1, 24):  # and it is so
        with pytest.raises(Exception, match="External data path validation failed for initializer: w3"):
            ort.InferenceSession(str(repo / "several" / "1" / "model.onnx"),
                                 providers=["CPUExecutionProvider"])


def test_a_data_file_shorter_than_its_tensors_dims_need_is_refused_without_a_length(sources: Path) -> None:
    """Tensors naming only a location (no offset, no length, as ONNX Runtime allows) still need their dims
    × type's bytes: a data file shorter than that is refused at build naming tensor and sizes (it used to
    pass: no length, nothing needed)."""
    set_external_location(sources / "several" / "net.onnx", None, keep_lengths=False)
    with open(sources / "several" / "w2", "r+b") as stream:
        stream.truncate(64)
    with pytest.raises(SpecError) as caught:
        build_repository(load_spec(sources / "deploy.yaml"), sources / "repo")
    assert [str(p) for p in caught.value.problems] == [
        f"{sources}/deploy.yaml:9:13 models[1].source: {sources}/several/net.onnx: tensor 'w2': "
        "external data 'w2' is too short: 64 bytes, the tensor needs bytes 0..262144"]


def test_a_version_folder_linked_from_elsewhere_keeps_its_data_files(
        sources: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A version folder that is a link to a folder elsewhere (Triton follows it) holds its ONNX and data
    files together: they are inside the ONNX's own folder, so validate passes them."""
    repo = sources / "repo"
    build_repository(load_spec(sources / "deploy.yaml"), repo, link=False)
    elsewhere = tmp_path_factory.mktemp("versions") / "1"
    shutil.move(repo / "several" / "1", elsewhere)
    (repo / "several" / "1").symlink_to(elsewhere)
    assert not validate_path(repo).errors, [str(p) for p in validate_path(repo).errors]
