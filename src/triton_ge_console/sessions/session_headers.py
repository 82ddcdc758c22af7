"""The console's test request: the session's own headers, and the request itself (from sessions.act.probe)."""

from __future__ import annotations

from triton_ge_console.sessions.act.probe import ProbeResult, send_test_request

__all__ = ["ProbeResult", "send_test_request", "session_headers"]


def session_headers(source: object) -> dict[str, str]:
    """The headers the session's own requests carry (its token), so commands pass a restricted server."""
    inner = getattr(source, "inner", None)  # a PendingSource delegates to its bound live source
    headers = getattr(inner if inner is not None else source, "request_headers", None)
    return dict(headers) if isinstance(headers, dict) else {}
