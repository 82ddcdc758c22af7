"""The documents name files that exist: a moved or retired module, test or benchmark fails here first."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "triton_ge_console"
# Maps of the code: every path-like name in them is a file or folder of this repository.
MAPS = ("CONTRIBUTING.md", "docs/architecture.md", "benchmarks/README.md")
# Documents for users also name paths of other things (Triton's folders, a pod's subresource): there only
# names that start at one of the repository's own top-level folders are checked.
# (every page of the docs site that is not a map).
DOCS_PAGES = sorted(str(page.relative_to(ROOT)) for page in (ROOT / "docs").rglob("*.md"))
FOR_USERS = ("README.md", "notebooks/README.md", *(page for page in DOCS_PAGES if page not in MAPS))
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


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict` (as CI's suite runs it): a broken link, a page left out of the nav or a
    reference section the hook cannot write fails here, with mkdocs's own line."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
               "-d", str(tmp_path / "site")]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=240)
    warnings = [line for line in done.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert done.returncode == 0 and warnings == [], done.stderr[-3000:]
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "ge-console reload" in cli and "--changed" in cli  # the verbs' help, written from the parser


def _section(text: str, heading: str) -> str:
    """A markdown section's text, up to the next heading of its level or above."""
    level = heading.split(" ")[0]
    body = text.split(f"\n{heading}\n", 1)[1]
    return re.split(rf"\n#{{1,{len(level)}}} ", body, maxsplit=1)[0]


def test_the_readme_keys_table_has_every_console_key() -> None:
    """The README's keys table lists every key the console binds (the `v` key was missing once)."""
    from triton_ge_console.console.actions import ACTIONS, FLEET_ACTIONS, key_label

    table = _section((ROOT / "README.md").read_text(encoding="utf-8"), "## Keys")
    missing = [key_label(action) for action in (*ACTIONS, *FLEET_ACTIONS)
               if action.key and f"`{key_label(action)}`" not in table]
    assert missing == [], f"the README's keys table lacks {missing}"


def test_every_glue_metric_is_in_the_metrics_reference() -> None:
    """Each `ge_*` series the glue writes is in docs/backend.md's metrics section (which the reference shows);
    a generate figure may be named there without its `ge_generate_` prefix."""
    source = "\n".join(p.read_text(encoding="utf-8") for p in (PACKAGE / "backend_glue").glob("*.py"))
    names = set(re.findall(r'"(ge_[a-z0-9_]*[a-z0-9])"', source))
    section = _section((ROOT / "docs" / "backend.md").read_text(encoding="utf-8"),
                       "## Metrics (in Triton's own `/metrics`)")
    missing = sorted(name for name in names
                     if f"`{name}`" not in section and f"`{name.removeprefix('ge_generate_')}" not in section)
    assert names and missing == [], f"metrics the docs do not name: {missing}"


def test_the_readme_is_a_quickstart() -> None:
    """At most 200 lines; its first two commands are the demo's and the test suite's, as CI runs it; it counts
    the notebooks there are."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    assert len(readme.splitlines()) <= 200
    assert blocks[0].strip() == 'python3 -m pip install -e ".[server,notebooks]" && ge-console demo'
    assert blocks[1].strip() == 'python3 -m pip install -e ".[server,notebooks,test]" && python3 -m pytest'
    numbers = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}
    count = len(list((ROOT / "notebooks").glob("*.ipynb")))
    assert f"{numbers[count]} notebooks" in readme.lower()


def test_the_spec_reference_lists_every_key_list_of_the_spec_reader() -> None:
    """Each `*_KEYS` tuple a spec module reads by is a section of the generated spec-keys page (QUEUE_KEYS is
    within BATCHING_KEYS; EXCLUDED_KEYS are keys refused with their reason), so a new section shows up."""
    import triton_ge_console.repository.spec as spec_package

    loader = importlib.util.spec_from_file_location("docs_hook", ROOT / "docs" / "hooks" / "generated.py")
    assert loader is not None and loader.loader is not None
    hook = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(hook)
    shown = [keys for _section, keys in hook.spec_sections()]
    lists = {}
    for path in Path(spec_package.__file__).parent.glob("*.py"):
        module = importlib.import_module(f"triton_ge_console.repository.spec.{path.stem}")
        lists.update({f"{path.stem}.{name}": value for name, value in vars(module).items()
                      if name.endswith("_KEYS") and isinstance(value, tuple)})
    missing = [name for name, keys in lists.items() if keys not in shown and not name.endswith(".QUEUE_KEYS")]
    assert lists and missing == [], f"key lists the spec reference does not show: {missing}"
