"""The fake AscendCL and the glue cite real files: every pyACL / AscendCL source they name is in the recorded
listings of hicann/runtime python/pyACL and hicann/ge (tests/data/sources/SOURCES.md)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "tests" / "data" / "sources"
CITING = [*sorted((ROOT / "tests" / "fakes" / "acl").glob("*.py")),
          *sorted((ROOT / "src" / "triton_ge_console" / "backend_glue").glob("acl_*.py")),
          ROOT / "src" / "triton_ge_console" / "repository" / "soc.py",
          ROOT / "src" / "triton_ge_console" / "model_files" / "om_file.py",
          ROOT / "tests" / "fakes" / "om_layout.py"]
CITED = re.compile(r"\b([a-z][a-z0-9_]*\.(?:cpp|cc))\b")


def test_every_cited_ascendcl_source_exists() -> None:
    """No python/pyACL/acl.cpp and the like: each .cpp/.cc named is one of the binding's or AscendCL's."""
    known = {Path(line).name for name in ("pyacl_files.txt", "ge_acl_files.txt")
             for line in (SOURCES / name).read_text(encoding="utf-8").split()}
    cited = {(path.name, name) for path in CITING for name in CITED.findall(path.read_text(encoding="utf-8"))}
    assert cited, "no citation found: the pattern no longer matches"
    assert sorted((where, name) for where, name in cited if name not in known) == []
