"""Whether a model's backend exists where Triton would look for it when loading the model (backend_model.cc:
a C++ library libtriton_<backend>.so in the version folder, the model folder or <backend dir>/<backend>/, or a
Python-based backend's model.py in <backend dir>/<backend>/). This depends on the machine."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from triton_ge_console.repository.rules.findings import Finding, error, warning

NATIVE_BACKENDS = Path("/opt/tritonserver/backends")
# Backends this project's installer lays out in every backend directory it launches Triton with.
OURS = ("python", "ge", "npu_ge")


@dataclass(frozen=True)
class BackendSearch:
    """The backend directories Triton would search; none known means a missing backend is only a warning."""

    directories: tuple[Path, ...]

    @property
    def known(self) -> bool:
        """Whether any backend directory is known to judge against."""
        return bool(self.directories)

    def where(self) -> str:
        """The directories, for a message."""
        return ", ".join(str(d) for d in self.directories) or "no backend directory"


def backend_search(explicit: Iterable[Path] = ()) -> BackendSearch:
    """The given directories (a session's, --backend-dir), else /opt/tritonserver/backends when it exists."""
    given = tuple(Path(d) for d in explicit)
    if given:
        return BackendSearch(given)
    return BackendSearch((NATIVE_BACKENDS,) if NATIVE_BACKENDS.is_dir() else ())


def _found(backend: str, search: BackendSearch, model_dir: Path | None, versions: list[Path]) -> bool:
    """A C++ library or a Python-based backend for `backend` where Triton looks."""
    library = f"libtriton_{backend}.so"
    local = [*versions, model_dir] if model_dir is not None else []
    if any((folder / library).is_file() for folder in local):
        return True
    return any(
        (d / backend / library).is_file() or (d / backend / "model.py").is_file() for d in search.directories
    )


def check_backend_exists(
    config: mc.ModelConfig,
    search: BackendSearch,
    model_dir: Path | None = None,
    versions: list[Path] | None = None,
) -> list[Finding]:
    """Triton's refusal of a backend it cannot find: an error where the backend directory is known, else a
    warning (the check depends on the machine Triton runs on)."""
    backend = config.backend
    if not backend or backend == "unknown" or config.runtime or backend in OURS:
        return []
    if _found(backend, search, model_dir, versions or []):
        return []
    refusal = (
        f"unable to find backend library for backend '{backend}', try specifying runtime on the model "
        "configuration."
    )
    if search.known:
        return [error("backend", refusal)]
    return [
        warning(
            "backend",
            f"{refusal} (Triton's refusal where its backend directory has no '{backend}': this check depends "
            "on the machine, and no backend directory is known here; give --backend-dir or --session)",
        )
    ]
