"""Architecture rules that keep the core UI-free, checked with import-linter."""

from __future__ import annotations

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
