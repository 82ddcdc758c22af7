"""A rule's finding (Finding, error, warning) and the Triton terms every rule module shares."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ERROR = "error"
WARNING = "warning"
WILDCARD_DIM = -1
ENSEMBLE_PLATFORM = "ensemble"


@dataclass(frozen=True)
class Finding:
    """One problem found in a config, before it is given a file position."""

    severity: str  # ERROR | WARNING
    field: str  # field path: "input[1].dims", 'parameters["device_ids"]', "" for the whole config
    message: str


def error(field: str, message: str) -> Finding:
    """An error finding."""
    return Finding(ERROR, field, message)


def warning(field: str, message: str) -> Finding:
    """A warning finding."""
    return Finding(WARNING, field, message)


def element_count(dims: Sequence[int]) -> int:
    """Triton's element count: -1 with any wildcard, 0 for no dims, else the product."""
    if WILDCARD_DIM in dims:
        return WILDCARD_DIM
    count = 0
    for k, dim in enumerate(dims):
        count = dim if k == 0 else count * dim
    return count
