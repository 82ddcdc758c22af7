"""Who may call an exposed server: Triton's restricted-API categories, and refusals worded for operators.

Triton 2.51 (`tritonserver --help`, `--http-restricted-api` / `--grpc-restricted-protocol`) accepts these
categories: health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace,
logging. A session with a token restricts all of them (health too, unless `--public-health`); Triton's
`health` category covers server liveness and readiness and each model's readiness.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from triton_ge_console.sessions.server.engines import token_header
from triton_ge_console.sessions.server.registry import SessionRecord, grpc_token_header, resolve_token

TRITON_CATEGORIES = (
    "health",
    "metadata",
    "inference",
    "shared-memory",
    "model-config",
    "model-repository",
    "statistics",
    "trace",
    "logging",
)
PUBLIC_HEALTH = ("health",)

# Triton's refusal, on HTTP ("This API is restricted, ...") and gRPC ("This protocol is restricted, ...").
_REFUSAL = re.compile(r"This (?:API|protocol) is restricted, expecting header '(?P<header>[^']*)'")


_TOKEN_SHAPE = re.compile(r"^[!-~]+$")
_TOKEN_SEPARATORS = ",:="  # Triton splits its --*-restricted-* value on these


def token_problem(token: str) -> str | None:
    """Why a token cannot work (Triton's argument syntax, an HTTP header value), None when it can."""
    if not token:
        return "the token is empty: give one of printable ASCII characters without spaces"
    if not _TOKEN_SHAPE.match(token):
        return "the token must be printable ASCII without spaces"
    if any(char in token for char in _TOKEN_SEPARATORS):
        return f"the token must not contain any of {' '.join(_TOKEN_SEPARATORS)} (Triton's separators)"
    return None


def restricted_categories(public_health: bool = False) -> tuple[str, ...]:
    """The categories a token guards: every one, or all but health for load-balancer probes."""
    return tuple(c for c in TRITON_CATEGORIES if not (public_health and c in PUBLIC_HEALTH))


def restriction_argument(token: str, header: str, public_health: bool = False) -> str:
    """The value of Triton's --http-restricted-api / --grpc-restricted-protocol for this token."""
    return f"{','.join(restricted_categories(public_health))}:{header}={token}"


def categories_in_words(public_health: bool = False) -> str:
    """"a, b and c" for messages."""
    names = list(restricted_categories(public_health))
    return ", ".join(names[:-1]) + " and " + names[-1]


def refusal(message: str, token_sent: bool) -> str | None:
    """Triton's restricted-API refusal in our words ("token refused" / "token required"), else None."""
    found = _REFUSAL.search(message)
    if found is None:
        return None
    header = found.group("header")
    if token_sent:
        return f"token refused: the server does not accept this session's token (header {header})"
    return f"token required: the server restricts this call to clients sending header {header} (--token)"


def explain(message: str, token_sent: bool) -> str:
    """A server message, with a restricted-API refusal replaced by our one line."""
    return refusal(message, token_sent) or message


@dataclass(frozen=True)
class SessionReach:
    """A session's record unpacked once: where its server answers, the token its calls carry, its log,
    and for a server launched on this machine its own files (an attached one's are not ours)."""

    name: str
    http_url: str
    grpc_url: str | None
    metrics_url: str | None
    token: str | None
    token_header: str
    log_path: Path | None
    local: bool  # launched on this machine, so its processes and files can be seen
    started_at: float | None  # local only
    session_dir: Path | None  # local only
    pid: int | None  # local only: the server as launched (a restart's supervisor records the new one)
    backend_dir: Path | None
    engine: str = "triton"  # sessions.server.engines
    ca_file: Path | None = None  # the CA an HTTPS server's certificate is checked against

    def headers(self, protocol: str = "http") -> dict[str, str]:
        """The header (gRPC: metadata key) carrying the session's token, empty when it has none."""
        if not self.token:
            return {}
        header, value = token_header(self.engine, self.token_header, self.token)
        # Triton's restricted gRPC protocols read the token from a prefixed metadata key.
        return {grpc_token_header(header) if protocol == "grpc" else header: value}


def token_headers(record: SessionRecord, protocol: str = "http") -> dict[str, str]:
    """The header (gRPC: metadata key) carrying the session's token, empty when it has none."""
    return session_reach(record).headers(protocol)


def session_reach(record: SessionRecord) -> SessionReach:
    """How to reach a session's server, its token file read once."""
    local = not record.attached
    return SessionReach(
        name=record.name,
        http_url=record.http_url,
        grpc_url=record.grpc_url,
        metrics_url=record.metrics_url,
        token=resolve_token(record.token_ref),
        token_header=record.token_header,
        log_path=record.log_path,
        local=local,
        started_at=record.started_at if local else None,
        session_dir=record.session_dir if local else None,
        pid=record.pid if local else None,
        backend_dir=record.backend_dir,
        engine=record.engine,
        ca_file=record.ca_file,
    )
