"""Where a tritonserver build lives and the environment it needs to run Python-based backends."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from triton_ge_console.errors import GeConsoleError

NATIVE_ROOT = Path("/opt/tritonserver")
# glibc's defaults hand large freed blocks back to the OS (blocks over the mmap threshold are unmapped,
# a heap top over the trim threshold is trimmed, both thresholds moving at run time), so the buffers
# of large responses (a few tokens of logits and up) keep being faulted in and zeroed anew. Fixed,
# higher thresholds keep them in the heap for reuse, at the price of up to about 64 MiB of freed memory
# per malloc arena staying in the process. Measured in benchmarks/response_path.py: less tritonserver
# CPU per 2 MiB response (recorded run: 0.69x / 0.82x), no clear effect at 125 KiB. A value the
# operator set wins; GE_CONSOLE_ALLOCATOR=glibc leaves both unset (glibc's own behaviour).
ALLOCATOR_OPT_OUT = "GE_CONSOLE_ALLOCATOR"
ALLOCATOR_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(64 << 20)}


class DistributionError(GeConsoleError, RuntimeError):
    """No usable tritonserver was found; the message says where we looked."""


@dataclass(frozen=True)
class TritonDistribution:
    """One tritonserver binary plus the Python backend files that go with it."""

    binary: Path
    # how it was found: "--tritonserver", "$TRITONSERVER", "PATH", "/opt/tritonserver", "nvidia-pytriton"
    origin: str
    libs_dir: Path | None  # extra shared libraries (the pytriton wheel bundles them)
    python_backend_dir: Path | None  # holds libtriton_python.so and triton_python_backend_utils.py
    stubs_dir: Path | None  # python_backend_stubs/<major.minor>/triton_python_backend_stub

    def stub_for(self, version: tuple[int, int] | None = None) -> Path | None:
        """The Python backend stub built for this interpreter's version, if the distribution ships one."""
        major, minor = version or sys.version_info[:2]
        if self.stubs_dir is not None:
            candidate = self.stubs_dir / f"{major}.{minor}" / "triton_python_backend_stub"
            if candidate.is_file():
                return candidate
        if self.python_backend_dir is not None:
            bundled = self.python_backend_dir / "triton_python_backend_stub"
            if bundled.is_file():
                return bundled
        return None

    def environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """Environment for tritonserver: the backend stub embeds *this* interpreter and its site-packages."""
        env = dict(os.environ if base is None else base)
        lib_dirs = [sysconfig.get_config_var("LIBDIR") or ""]
        if self.libs_dir is not None:
            lib_dirs.append(str(self.libs_dir))
        existing = env.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = ":".join(d for d in [*lib_dirs, existing] if d)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        if env.get(ALLOCATOR_OPT_OUT) != "glibc":
            for name, value in ALLOCATOR_ENV.items():
                env.setdefault(name, value)
        return env


def _pytriton_distribution() -> TritonDistribution | None:
    """The tritonserver shipped inside the nvidia-pytriton wheel, if installed."""
    try:
        import pytriton  # optional dependency (the "server" extra)
    except ImportError:
        return None
    root = Path(pytriton.__file__).parent / "tritonserver"
    binary = root / "bin" / "tritonserver"
    if not binary.is_file():
        return None
    libs = Path(pytriton.__file__).parent.parent / "nvidia_pytriton.libs"
    return TritonDistribution(
        binary=binary,
        origin="nvidia-pytriton",
        libs_dir=libs if libs.is_dir() else None,
        python_backend_dir=root / "backends" / "python",
        stubs_dir=root / "python_backend_stubs",
    )


def _native_distribution(binary: Path, origin: str) -> TritonDistribution:
    """A tritonserver installed natively (container or /opt), with its own backends folder."""
    root = binary.resolve().parent.parent
    python_dir = root / "backends" / "python"
    fallback = _pytriton_distribution()
    return TritonDistribution(
        binary=binary,
        origin=origin,
        libs_dir=None,
        python_backend_dir=python_dir if python_dir.is_dir() else None,
        stubs_dir=fallback.stubs_dir if fallback else None,
    )


def find_distribution(explicit: str | Path | None = None) -> TritonDistribution:
    """Find tritonserver: explicit path, $TRITONSERVER, PATH, /opt/tritonserver, then the pytriton wheel."""
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise DistributionError(f"--tritonserver {path}: no such file")
        return _native_distribution(path, "--tritonserver")
    env_value = os.environ.get("TRITONSERVER")
    if env_value:
        path = Path(env_value)
        if not path.is_file():
            raise DistributionError(f"$TRITONSERVER={env_value}: no such file")
        return _native_distribution(path, "$TRITONSERVER")
    on_path = shutil.which("tritonserver")
    if on_path:
        return _native_distribution(Path(on_path), "PATH")
    opt_binary = NATIVE_ROOT / "bin" / "tritonserver"
    if opt_binary.is_file():
        return _native_distribution(opt_binary, str(NATIVE_ROOT))
    wheel = _pytriton_distribution()
    if wheel is not None:
        return wheel
    raise DistributionError(
        "no tritonserver found: looked at --tritonserver, $TRITONSERVER, PATH, "
        f"{opt_binary} and the nvidia-pytriton wheel; install it with: python3 -m pip install -e '.[server]'"
    )
