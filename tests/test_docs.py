"""The documents name files that exist: a moved or retired module, test or benchmark fails here first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "triton_ge_console"
# Maps of the code: every path-like name in them is a file or folder of this repository.
MAPS = ("CONTRIBUTING.md", "docs/architecture.md", "benchmarks/README.md")
# Documents for users also name paths of other things (Triton's folders, a pod's subresource): there only
# names that start at one of the repository's own top-level folders are checked.
FOR_USERS = ("README.md", "docs/backend.md", "docs/openai.md", "docs/ascend.md", "docs/sessions.md",
             "docs/engines.md", "notebooks/README.md")
TOP = ("src/", "tests/", "benchmarks/", "docs/", "examples/", "notebooks/", ".ci/")
NAMED = re.compile(r"`([^`\s]+)`|\]\(([^)\s#]+)")
PATHLIKE = re.compile(r"^\.?[\w\-]+(\.[\w\-]+)*(/[\w.\-]+)*/?$")


def named_paths(document: Path) -> list[str]:
    """The path-like names in a document: in backticks or as a link, with a '/' or a file suffix."""
    found = []
    for match in NAMED.finditer(document.read_text(encoding="utf-8")):
        name = match.group(1) or match.group(2)
        if name.startswith(("http", "/", "~", "$")) or not PATHLIKE.match(name):
            continue
        if "/" in name or name.endswith((".py", ".md", ".toml", ".yaml", ".ipynb")):
            found.append(name)
    return found


def exists(name: str, document: Path) -> bool:
    """Whether the name is a path from the repository, the document's folder, the package or one of its
    sub-packages (a map may say `observe/poller.py` inside a section about `sessions`), or a module there
    named without its `.py` (`act/act_cli`)."""
    bases = [ROOT, document.parent, PACKAGE, *(p for p in PACKAGE.iterdir() if p.is_dir())]
    return any((base / name).exists() or (base / f"{name}.py").is_file() for base in bases)


@pytest.mark.parametrize("name", MAPS)
def test_every_path_a_map_of_the_code_names_exists(name: str) -> None:
    document = ROOT / name
    missing = [path for path in named_paths(document) if not exists(path, document)]
    assert missing == [], f"{name} names paths that do not exist: {missing}"


@pytest.mark.parametrize("name", FOR_USERS)
def test_every_repository_path_a_users_document_names_exists(name: str) -> None:
    document = ROOT / name
    missing = [path for path in named_paths(document) if path.startswith(TOP) and not (ROOT / path).exists()]
    assert missing == [], f"{name} names paths that do not exist: {missing}"
