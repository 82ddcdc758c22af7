"""Architecture rules: the core stays UI-free (import-linter), and each class name means one thing."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
