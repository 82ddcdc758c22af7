"""Architecture rules: the core stays UI-free (import-linter), each class name means one thing, and every
third-party import is declared."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # the test extra installs tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "triton_ge_console"
FAKES = ROOT / "tests" / "fakes"  # on the stub's sys.path, so the fake `acl` imports its siblings by name
# Modules that no package index provides: they exist only inside the runtime that loads our code.
PROVIDED_BY_THE_RUNTIME = {
    "triton_python_backend_utils": "Triton's Python backend injects it into the stub that runs backend_glue",
    "acl": "pyACL, installed with CANN on an Ascend host (tests use tests/fakes/acl)",
}


def test_core_layers_import_no_ui_toolkit() -> None:
    """repository, backend_glue and sessions never import textual or ipywidgets (nor the UI packages)."""
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    result = subprocess.run([exe, str(ROOT / "pyproject.toml")], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Core layers import no UI toolkit KEPT" in result.stdout


def test_no_two_classes_share_a_name() -> None:
    """Each class name means one thing across the package (private ones too), so grep finds the one meant."""
    places: dict[str, list[str]] = {}
    for path in sorted((ROOT / "src" / "triton_ge_console").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                places.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    shared = {name: where for name, where in places.items() if len(where) > 1}
    assert shared == {}, shared


def imported_top_level_modules(root: Path = SRC) -> dict[str, set[str]]:
    """Every top-level module an absolute import below root names (lazy imports too), with the files naming
    it."""
    found: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(root)))
    return found


def declared_distributions() -> set[str]:
    """Normalized names of pyproject's dependencies and optional dependencies (every extra)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values()
                                                 for r in extra)]
    return {_normalized(re.match(r"[A-Za-z0-9._-]+", r).group()) for r in requirements}  # type: ignore[union-attr]


def _normalized(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize("root", (SRC, ROOT / "tests", ROOT / "benchmarks"), ids=lambda root: root.name)
def test_every_imported_third_party_package_is_declared(root: Path) -> None:
    """Each third-party module src, the tests or the benchmarks import comes from a distribution
    pyproject.toml declares (the tests' and benchmarks' in the test extra), not one that happens to come
    with another."""
    distributions = importlib.metadata.packages_distributions()
    declared = declared_distributions()
    own = {SRC.name, "tests", *(path.stem for path in root.glob("*.py")),  # a benchmark imports its sibling
           *(path.stem for path in FAKES.glob("*.py"))}  # the fake acl, imported as `acl`, its siblings
    missing = []
    for module, files in sorted(imported_top_level_modules(root).items()):
        if module in sys.stdlib_module_names or module in PROVIDED_BY_THE_RUNTIME or module in own:
            continue
        providers = {_normalized(d) for d in distributions.get(module, [])} or {_normalized(module)}
        if not providers & declared:
            missing.append(f"{module} (from {sorted(providers) or 'no installed distribution'}; "
                           f"imported by {', '.join(sorted(files)[:3])})")
    assert not missing, "imported but not declared in pyproject.toml: " + "; ".join(missing)


def test_no_two_modules_import_each_other() -> None:
    """A circle (deferred imports too) means two files are one piece of logic split, or one runs back up."""
    import grimp

    graph = grimp.build_graph("triton_ge_console")
    pairs = {
        tuple(sorted((module, imported)))
        for module in graph.modules
        for imported in graph.find_modules_directly_imported_by(module)
        if module in graph.find_modules_directly_imported_by(imported)
    }
    assert pairs == set(), f"modules importing each other: {sorted(pairs)}"


# The state words views and commands compare against, named once in triton_terms (and session_states).
STATE_WORDS = {"READY", "LOADING", "UNLOADING", "UNAVAILABLE", "UNKNOWN", "FAILING", "NOT_READY"}
# the same spelling meaning something else: a gRPC status code Triton prints in a failed start's log line
OTHER_MEANINGS = {("sessions/server/server_log.py", "UNAVAILABLE")}


def test_model_state_words_are_spelled_only_in_triton_terms() -> None:
    """A literal "UNLOADING" beside MODEL_UNLOADING would drift from it: every module names the constant."""
    spelled = sorted(
        (str(path.relative_to(SRC)), node.lineno, node.value)
        for path in SRC.rglob("*.py") if path.name != "triton_terms.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in STATE_WORDS
        and (str(path.relative_to(SRC)), node.value) not in OTHER_MEANINGS
    )
    assert spelled == [], f"state words spelled outside triton_terms: {spelled}"
