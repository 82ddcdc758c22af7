"""Strip a notebook's outputs, execution counts and saved widget state: the git clean filter that keeps
JupyterLab's autosave (outputs in the working copy) out of commits. Standard library only.

    git config filter.strip-notebook-outputs.clean "python3 notebooks/strip_outputs.py"
    git config filter.strip-notebook-outputs.smudge cat

(.gitattributes applies it to notebooks/*.ipynb). As a filter it reads stdin and writes stdout; given
paths, it strips those files in place.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def stripped(text: str) -> str:
    """The notebook without outputs, execution counts or widget state, laid out as nbformat writes it."""
    notebook: dict[str, Any] = json.loads(text)
    notebook.get("metadata", {}).pop("widgets", None)
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cell.get("metadata", {}).pop("execution", None)  # JupyterLab's optional timing record
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(paths: list[str]) -> None:
    """Filter stdin to stdout, or strip the given files in place."""
    if not paths:  # bytes in and out: the notebooks hold UTF-8 whatever the locale
        sys.stdout.buffer.write(stripped(sys.stdin.buffer.read().decode("utf-8")).encode("utf-8"))
    for path in map(Path, paths):
        path.write_text(stripped(path.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
