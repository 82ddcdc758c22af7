"""Shared fixtures: real tritonserver processes on free loopback ports, always stopped afterwards."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import wait_until
from triton_ge_console.backend_glue.distribution import (
    DistributionError,
    TritonDistribution,
    find_distribution,
)
from triton_ge_console.sessions.observe.health import stub_backends
from triton_ge_console.sessions.server.process import Ports, TritonProcess, http_ok, pick_ports, server_args
from triton_ge_console.sessions.server.shm import new_shm_prefix, remove_shm_regions, shm_arguments
from triton_ge_console.triton_args import switched_off

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"  # what the project's own tests read: inside the repository

# Fixtures that start a tritonserver (directly or through those they use): their tests are marked `server`.
SERVER_FIXTURES = frozenset({"triton_dist", "triton_factory", "bench_server", "python_backends"})


@dataclass
class RunningServer:
    """A tritonserver started by a test, with its URLs and log."""

    process: TritonProcess
    ports: Ports
    log_path: Path
    final_log: str | None = None  # kept once the server stopped and its folder is gone

    @property
    def http_url(self) -> str:
        """Base HTTP URL."""
        return f"http://127.0.0.1:{self.ports.http}"

    @property
    def http_hostport(self) -> str:
        """host:port form tritonclient.http wants."""
        return f"127.0.0.1:{self.ports.http}"

    @property
    def grpc_hostport(self) -> str:
        """host:port form tritonclient.grpc wants."""
        return f"127.0.0.1:{self.ports.grpc}"

    def hostport(self, client_module: Any) -> str:
        """The host:port tritonclient's http or grpc module wants."""
        return self.grpc_hostport if client_module.__name__.endswith("grpc") else self.http_hostport

    @property
    def metrics_url(self) -> str:
        """The Prometheus /metrics URL."""
        return f"http://127.0.0.1:{self.ports.metrics}/metrics"

    def log(self) -> str:
        """Everything the server logged so far (all of it, after it stopped)."""
        if self.final_log is not None:
            return self.final_log
        return self.log_path.read_text(encoding="utf-8", errors="replace")


@pytest.fixture(autouse=True, scope="session")
def _own_digest_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The suite hashes into its own digest cache (never the user's), as do the processes it starts;
    session-wide, so module fixtures that build repositories use it too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GE_CONSOLE_CACHE_DIR", str(tmp_path_factory.mktemp("digest-cache")))
        yield


@pytest.fixture(scope="session")
def triton_dist() -> TritonDistribution:
    """The tritonserver this suite runs (the nvidia-pytriton wheel on CI)."""
    return find_distribution()


def python_backend_dir(dist: TritonDistribution, dest: Path) -> Path:
    """A backend dir holding just Triton's Python backend with the stub for this interpreter."""
    python_dir = dest / "python"
    python_dir.mkdir(parents=True, exist_ok=True)
    stub = dist.stub_for()
    assert dist.python_backend_dir is not None and stub is not None, "tritonserver has no Python backend"
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        shutil.copy2(dist.python_backend_dir / name, python_dir / name)
    shutil.copy2(stub, python_dir / "triton_python_backend_stub")
    return dest


@pytest.fixture(scope="session")
def python_backends(triton_dist: TritonDistribution, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Python-backend dir for the whole run (servers only read it): `--backend-directory` for tests."""
    return python_backend_dir(triton_dist, tmp_path_factory.mktemp("python-backends"))


@contextlib.contextmanager
def run_triton(
    dist: TritonDistribution,
    repository: Path,
    backend_dir: Path,
    models: tuple[str, ...] = (),
    extra: tuple[str, ...] = (),
    timeout: float = 90.0,
) -> Iterator[RunningServer]:
    """Start tritonserver on free ports, wait until live and the named models are loaded, always stop it."""
    ports = pick_ports()
    workdir = Path(tempfile.mkdtemp(prefix="ge-test-server-"))
    log_path = workdir / "server.log"
    args = server_args(repository, backend_dir, ports, extra=(*[f"--load-model={m}" for m in models], *extra))
    args += shm_arguments(new_shm_prefix(workdir), stub_backends(backend_dir))  # its own regions: removed
    process = TritonProcess(dist, args, log_path, workdir)
    process.start()
    running = RunningServer(process, ports, log_path)
    try:
        process.wait_ready(f"http://127.0.0.1:{ports.http}", timeout=timeout)
        # Triton opens its metrics port after the HTTP one: a test polling at once could find it closed
        if not switched_off(args, "--allow-metrics"):
            wait_until(lambda: http_ok(running.metrics_url), timeout=timeout,
                       what="the metrics port answering")
        yield running
    finally:
        process.stop()
        running.final_log = running.log()
        remove_shm_regions(workdir)  # a stub a test killed leaves its region behind
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def triton_factory(triton_dist: TritonDistribution) -> Iterator[object]:
    """A function starting servers for this test; every one is stopped when the test ends."""
    with contextlib.ExitStack() as stack:

        def start(repository: Path, backend_dir: Path, models: tuple[str, ...] = (),
                  extra: tuple[str, ...] = ()) -> RunningServer:
            return stack.enter_context(run_triton(triton_dist, repository, backend_dir, models, extra))

        yield start


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `server` every test using a server-starting fixture, before `-m` selects (future tests too)."""
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.server)


class ServerTrap:
    """A tritonserver stand-in that records each start and refuses to run: what not-`server` tests get."""

    def __init__(self, folder: Path, python_backend: Path | None) -> None:
        root = folder / "tritonserver"  # laid out like /opt/tritonserver
        self.binary = root / "bin" / "tritonserver"
        self.calls = folder / "started.log"
        self.calls.touch()
        backend = root / "backends" / "python"  # where find_distribution() looks: launching gets this far
        backend.mkdir(parents=True)
        self.binary.parent.mkdir(parents=True)
        for name in ("libtriton_python.so", "triton_python_backend_utils.py", "triton_python_backend_stub"):
            real = python_backend / name if python_backend is not None else None
            if real is not None and real.is_file():  # validate runs the real utils without a server
                (backend / name).symlink_to(real)
            else:
                (backend / name).touch()
        self.binary.write_text(
            "#!/bin/sh\n"
            f'echo "$$ $*" >> "{self.calls}"\n'
            'echo "tritonserver started by a test not marked server (see tests/conftest.py)" >&2\n'
            "exit 97\n", encoding="utf-8")
        self.binary.chmod(0o755)

    def started(self) -> int:
        """How many tritonservers were started so far."""
        return len(self.calls.read_text(encoding="utf-8").splitlines())


def pytest_configure(config: pytest.Config) -> None:
    """Make the trap (one per run), so a not-`server` test that starts tritonserver fails, in any run; the
    commands the tests start take Ctrl-C as from a terminal, however pytest was started."""
    _take_ctrl_c()
    folder = Path(tempfile.mkdtemp(prefix="ge-test-server-trap-"))
    try:
        python_backend = find_distribution().python_backend_dir
    except DistributionError:
        python_backend = None
    config.stash[_TRAP] = ServerTrap(folder, python_backend)
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


_TRAP = pytest.StashKey[ServerTrap]()


def _take_ctrl_c() -> None:
    """Undo an inherited SIG_IGN for SIGINT: a shell without job control starts a background job (`pytest
    &`, a script's) ignoring it, every process the suite starts inherits that, and Python then never raises
    KeyboardInterrupt, so a test's SIGINT to `attach`, `watch` or `bench` went unheard. Caught here, it is
    back at its default in each child."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _trapped(item: pytest.Item) -> Generator[None, object, object]:
    """Run one phase of a not-`server` test with $TRITONSERVER at the trap; fail it if that was started."""
    if item.get_closest_marker("server") is not None:
        return (yield)
    trap = item.config.stash[_TRAP]
    before, saved = trap.started(), os.environ.get("TRITONSERVER")
    os.environ["TRITONSERVER"] = str(trap.binary)  # find_distribution() honours it first, children inherit it
    try:
        return (yield)
    finally:
        if saved is None:
            os.environ.pop("TRITONSERVER", None)
        else:
            os.environ["TRITONSERVER"] = saved
        if trap.started() > before:
            pytest.fail(f"{item.nodeid} started a tritonserver but is not marked `server` "
                        "(use a server fixture or @pytest.mark.server)", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    """Setup of a not-`server` test runs under the trap."""
    return (yield from _trapped(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """The body of a not-`server` test runs under the trap."""
    return (yield from _trapped(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    """Teardown of a not-`server` test runs under the trap."""
    return (yield from _trapped(item))
