"""Words Triton and ge-console agree on, and how an endpoint a user gives is read, shared by every layer (a
leaf: of the package it imports only errors)."""

from __future__ import annotations

import contextlib
import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from triton_ge_console.errors import InputError

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


@dataclass(frozen=True)
class Endpoint:
    """One endpoint read from a URL or HOST:PORT: the host without an IPv6 literal's brackets."""

    scheme: str
    host: str
    port: int | None
    path: str = ""

    @property
    def netloc(self) -> str:
        """host:port as a URL writes it (an IPv6 literal in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"

    @property
    def url(self) -> str:
        """scheme://host:port plus the path, normalised (lower-case scheme, no trailing slash)."""
        return f"{self.scheme}://{self.netloc}{self.path}"


def parse_endpoint(url: str, what: str = "URL", schemes: tuple[str, ...] = ("http", "https"),
                   path_allowed: bool = False, strict: bool = True) -> Endpoint:
    """The one reading of an endpoint a user or a record gives ("host:port" takes schemes[0]); strict, an
    InputError naming what is wrong (scheme, host, port, path, credentials); lenient, whatever it has."""
    try:
        parsed = urlsplit(with_scheme(url, schemes[0]))
    except ValueError:  # an unclosed IPv6 bracket
        if strict:
            raise InputError(f"{what} {url[:80]!r}: expected {schemes[0]}://HOST:PORT") from None
        return Endpoint(schemes[0], "", None)
    try:
        port = parsed.port
    except ValueError:
        if strict:
            raise InputError(f"{what} {url[:80]!r}: the port is not a number in 0-65535") from None
        port = None
    scheme, host, path = parsed.scheme.lower(), parsed.hostname or "", parsed.path.rstrip("/")
    if strict:
        if scheme not in schemes or not host or port is None:
            raise InputError(f"{what} {url[:80]!r}: expected {schemes[0]}://HOST:PORT")
        if parsed.username or parsed.password or parsed.query or parsed.fragment:
            raise InputError(f"{what} {url[:80]!r}: credentials, a query or a fragment are not taken here")
        if path and not path_allowed:
            raise InputError(f"{what} {url[:80]!r}: an endpoint has no path (give {schemes[0]}://HOST:PORT)")
    return Endpoint(scheme, host, port, path if path_allowed or not strict else "")


def is_loopback(address: str) -> bool:
    """Whether an address only accepts local connections."""
    if address == "localhost":
        return True
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(address).is_loopback
    return False


def host_and_port(address: str, what: str = "address") -> tuple[str, int]:
    """(host, port) of HOST:PORT or a URL, an IPv6 literal without brackets; InputError without both."""
    endpoint = parse_endpoint(address, strict=False, schemes=("tcp",), path_allowed=True)
    if not endpoint.host or endpoint.port is None:
        raise InputError(f"{what} {address[:80]!r}: expected HOST:PORT")
    return endpoint.host, endpoint.port
