"""Lay out a Triton backend directory: the Python backend, the `ge` glue, and `npu_ge` (glue or native)."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from triton_ge_console.backend_glue.distribution import TritonDistribution, find_distribution
from triton_ge_console.errors import GeConsoleError
from triton_ge_console.files import write_atomic

NATIVE_NPU_GE = Path("/opt/tritonserver/backends/npu_ge/libnpu_ge.so")
GLUE_MODEL_PY = Path(__file__).with_name("model.py")


class InstallError(GeConsoleError, RuntimeError):
    """The backend directory could not be laid out; the message names the missing piece."""


@dataclass(frozen=True)
class InstalledFile:
    """One file the installer placed, where it came from, and what changed."""

    path: Path
    source: Path
    action: str  # "added" | "updated" | "unchanged" | "linked"


@dataclass(frozen=True)
class InstallReport:
    """What `install_backend_dir` used and did."""

    dest: Path
    distribution: TritonDistribution
    stub: Path
    python_version: str
    npu_ge: str  # "glue" or "native <folder>"
    files: tuple[InstalledFile, ...] = field(default=())

    @property
    def changed(self) -> bool:
        """Whether this run changed anything on disk."""
        return any(f.action != "unchanged" for f in self.files)

    def lines(self) -> list[str]:
        """Human-readable summary, one fact per line."""
        out = [
            f"backend directory: {self.dest}",
            f"tritonserver: {self.distribution.binary} (found via {self.distribution.origin})",
            f"python backend stub: {self.stub} (Python {self.python_version})",
            f"npu_ge: {self.npu_ge}",
        ]
        out += [f"  {f.action:9} {f.path.relative_to(self.dest)}  <- {f.source}" for f in self.files]
        return out


def install_backend_dir(
    dest: Path,
    dist: TritonDistribution | None = None,
    native_npu_ge: Path | None = None,
) -> InstallReport:
    """Create or refresh dest so `--backend-directory=dest` serves `ge` and `npu_ge`; idempotent."""
    dist = dist or find_distribution()
    stub = dist.stub_for()
    if stub is None:
        raise InstallError(f"{dist.binary}: no Python backend stub for Python {_py_version()} "
                           f"(looked in {dist.stubs_dir} and {dist.python_backend_dir})")
    if dist.python_backend_dir is None:
        raise InstallError(f"{dist.binary}: no Python backend (libtriton_python.so) found beside it")
    dest = Path(dest).absolute()
    dest.mkdir(parents=True, exist_ok=True)
    python_src = dist.python_backend_dir
    files = [
        _place(python_src / "libtriton_python.so", dest / "python" / "libtriton_python.so"),
        _place(python_src / "triton_python_backend_utils.py",
               dest / "python" / "triton_python_backend_utils.py"),
        _place(stub, dest / "python" / "triton_python_backend_stub", executable=True),
        _place(GLUE_MODEL_PY, dest / "ge" / "model.py"),
    ]
    native_dir = _native_npu_ge_dir(native_npu_ge)
    if native_dir is None:
        files.append(_place(GLUE_MODEL_PY, dest / "npu_ge" / "model.py", replace_link=True))
        npu_ge = "glue (CPU emulation / AscendCL through the ge glue)"
    else:
        files.append(_link_dir(native_dir, dest / "npu_ge"))
        npu_ge = f"native {native_dir}"
    return InstallReport(dest, dist, stub, _py_version(), npu_ge, tuple(files))


def _py_version() -> str:
    """This interpreter's major.minor."""
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def _native_npu_ge_dir(explicit: Path | None) -> Path | None:
    """The folder holding a native libnpu_ge.so: the given one (file or folder), else the default spot."""
    if explicit is not None:
        explicit = Path(explicit).absolute()
        library = explicit / "libnpu_ge.so" if explicit.is_dir() else explicit
        if not library.is_file():
            raise InstallError(f"--native-npu-ge {explicit}: no libnpu_ge.so there")
        return library.parent
    return NATIVE_NPU_GE.parent if NATIVE_NPU_GE.is_file() else None


def _same_file(a: Path, b: Path) -> bool:
    """Whether two regular files have identical bytes."""
    if not b.is_file() or b.is_symlink() or a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            chunk_a, chunk_b = fa.read(1 << 20), fb.read(1 << 20)
            if chunk_a != chunk_b:
                return False
            if not chunk_a:
                return True


def _place(source: Path, target: Path, executable: bool = False, replace_link: bool = False) -> InstalledFile:
    """Copy source to target atomically unless target already holds the same bytes."""
    if not source.is_file():
        raise InstallError(f"{source}: missing (needed for {target})")
    if replace_link and target.parent.is_symlink():
        target.parent.unlink()
    if _same_file(source, target) and (not executable or os.access(target, os.X_OK)):
        return InstalledFile(target, source, "unchanged")
    action = "updated" if target.exists() else "added"
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, source.read_bytes(), mode=0o755 if executable else 0o644)
    return InstalledFile(target, source, action)


def _link_dir(native_dir: Path, target: Path) -> InstalledFile:
    """Point target at the native backend folder with a symlink (replacing a glue folder)."""
    if target.is_symlink() and Path(os.readlink(target)) == native_dir:
        return InstalledFile(target, native_dir, "unchanged")
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)
    tmp = target.with_name(f".{target.name}.link")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(native_dir, target_is_directory=True)
    os.replace(tmp, target)
    return InstalledFile(target, native_dir, "linked")
