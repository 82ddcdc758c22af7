"""The public API (triton_ge_console.api): the notebooks' one door into the package, every name of it
documented, and the seed spec found in a checkout or written from an installed package."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from triton_ge_console import api
from triton_ge_console.repository.spec.load import load_spec

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
API_PAGE = ROOT / "docs" / "reference" / "api.md"
ALLOWED = ("triton_ge_console.api", "triton_ge_console.widgets")


def imported_modules(code: str) -> set[str]:
    """Every module a notebook's code imports (IPython's magics and shell lines left out)."""
    source = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem)
def test_a_notebook_imports_only_the_api_and_the_widgets_from_the_package(notebook: Path) -> None:
    """A notebook reaching into sessions.server.access (or any internal) breaks when that moves."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    code = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
    modules = set().union(*(imported_modules(text) for text in code))
    ours = {m for m in modules if m.split(".")[0] == "triton_ge_console"}
    assert ours, "the notebook imports nothing of the package: the test would not see an internal import"
    internal = sorted(m for m in ours if not any(m == a or m.startswith(a + ".") for a in ALLOWED))
    assert internal == [], f"{notebook.name} imports internals: {internal}"


def test_every_api_name_is_documented_and_every_documented_name_exists() -> None:
    """docs/reference/api.md's tables name exactly api.__all__, each of which resolves."""
    documented = set(re.findall(r"^\| `(\w+)` \|", API_PAGE.read_text(encoding="utf-8"), re.M))
    assert documented == set(api.__all__)
    assert all(hasattr(api, name) for name in api.__all__)


def test_the_seed_spec_is_the_checkout_s_or_written_where_asked(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """In a checkout it is examples/seed.yaml; installed without one, the same spec written in the folder."""
    assert api.seed_spec(tmp_path) == ROOT / "examples" / "seed.yaml" and not list(tmp_path.iterdir())
    monkeypatch.setattr(api, "SEED", tmp_path / "no-checkout" / "examples" / "seed.yaml")
    written = api.seed_spec(tmp_path)
    assert written == tmp_path / "seed.yaml"
    seed = ROOT / "examples" / "seed.yaml"
    assert written.read_text(encoding="utf-8") == seed.read_text(encoding="utf-8")
    assert [m.name for m in load_spec(written).models] == ["llama_model", "bert_model"]
