"""The README's shell blocks run as written, in order, in one folder, against the sessions they start:
a newcomer's path (init -> up -> the session's URL -> curl / bench -> reload -> down, then the LLM path)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Blocks not run here, each with why (matched by their first line).
NOT_RUN = {
    'python3 -m pip install -e ".[server,notebooks]" && ge-console demo':
        "installs the package and opens the demo: CI's own set-up installs it; tests/console run the demo",
    'python3 -m pip install -e ".[server,notebooks,test]" && python3 -m pytest': "it is this suite",
    "ge-console": "opens the interactive console on a terminal: tests/console drive it",
}
# What a block's output must show, beside exiting 0 (matched by their first line).
SHOWS = {
    "ge-console init deploy.yaml": "session 'prod' ready",
    "ge-console status prod": '"pooled"',
    "ge-console bench bert_model --concurrency 1,4 --shape input_ids:16": "new instance of version 1 READY",
    "ge-console down prod": "session 'prod' stopped",
    "cat > llm.yaml <<'SPEC'": '"text_output"',
}


def readme_blocks() -> list[str]:
    """The README's ```bash blocks, in order."""
    return re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)


def test_every_readme_block_is_run_or_skipped_with_its_reason() -> None:
    """A new block is either run below (with what it must show) or listed as not run, with why."""
    firsts = [block.splitlines()[0] for block in readme_blocks()]
    assert sorted(firsts) == sorted([*NOT_RUN, *SHOWS])


@pytest.mark.server
@pytest.mark.timeout(900)
def test_the_readmes_blocks_run_as_written(tmp_path: Path, state_dir: Path) -> None:
    """Each block runs in bash (-e: every command must succeed) in one working folder, in the README's order;
    the state dir is the test's own, and every session left running is stopped after (the fixture)."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed: the README's blocks use it")
    env = {**os.environ, "GE_CONSOLE_STATE_DIR": str(state_dir)}
    for block in readme_blocks():
        first = block.splitlines()[0]
        if first in NOT_RUN:
            continue
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL)
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"README block failed ({done.returncode}):\n{block}\n{output[-3000:]}"
        assert SHOWS[first] in output, f"README block did not show {SHOWS[first]!r}:\n{output[-3000:]}"
