"""Words Triton and ge-console agree on, and how an endpoint a user gives is read, shared by every layer (a
leaf: it imports nothing of the package)."""

from __future__ import annotations

import contextlib
import ipaddress

# A model version's state in Triton's repository index (triton core's model_lifecycle.h, ModelReadyState)
MODEL_READY = "READY"  # it serves
MODEL_LOADING, MODEL_UNLOADING = "LOADING", "UNLOADING"
MODEL_UNAVAILABLE = "UNAVAILABLE"  # not loaded, or its load failed (the index gives a reason)
MODEL_UNKNOWN = "UNKNOWN"  # an index entry without a state
HELD_STATES = (MODEL_READY, MODEL_LOADING, MODEL_UNLOADING)  # a model Triton serves or is changing over
CHANGING_STATES = (MODEL_LOADING, MODEL_UNLOADING)  # no command makes sense until it settles
# ge-console's health of a model version (observe.health decides it): FAILING is READY in Triton's index,
# yet not serving (its instance died, or every request fails)
HEALTH_OK, FAILING, NOT_READY = "OK", "FAILING", "NOT_READY"
# A server's health as its endpoints said (a snapshot's, a fleet row's): ready and live, live only, not
# live (down), or no connection at all (the fleet's unreachable)
SERVER_READY, SERVER_LIVE, SERVER_DOWN, SERVER_UNREACHABLE = "ready", "live", "down", "unreachable"
DEFAULT_PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}  # tritonserver's own defaults
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # TYPE_INT64, and Triton's int64 config fields

# A config parameter a reload sets to a fresh value, so Triton loads new instances (backends ignore it).
RELOAD_PARAMETER = "ge_console_reload_id"


def with_scheme(url: str, scheme: str = "http") -> str:
    """A URL as given, with `scheme://` put in front when it has none ("host:port" is how users write it)."""
    url = url.strip()
    return url if "://" in url else f"{scheme}://{url}"


def host_port(url: str) -> str:
    """host:port of a URL or of host:port itself: the scheme and a trailing slash dropped."""
    return url.split("://", 1)[-1].rstrip("/")


def is_loopback(address: str) -> bool:
    """Whether an address only accepts local connections."""
    if address == "localhost":
        return True
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(address).is_loopback
    return False
