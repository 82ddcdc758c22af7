"""Triton's HTTP APIs a poll needs (health, metadata, repository index, statistics, config) over plain
http.client: the cheapest per poll (no client-library objects; one kept-alive socket per endpoint, which the
poller closes when an idle connection would hold up the server's shutdown)."""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triton_ge_console.errors import GeConsoleError, InputError
from triton_ge_console.sessions.observe.rates import ModelCounters
from triton_ge_console.sessions.server.access import refusal
from triton_ge_console.triton_terms import MODEL_UNAVAILABLE, parse_endpoint

NS_PER_US = 1000.0


class EndpointError(GeConsoleError, RuntimeError):
    """The server could not be reached or answered something unusable; `timed_out`: it took the connection
    but sent no reply in time (hung, or stopped by SIGSTOP)."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class HttpEndpoint:
    """One kept-alive HTTP(S) connection to a base URL, reopened once when the server dropped it."""

    def __init__(self, base_url: str, timeout: float = 2.0, headers: dict[str, str] | None = None,
                 ca_file: str | Path | None = None) -> None:
        parsed = parse_endpoint(base_url, strict=False, path_allowed=True)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise InputError(f"not an http(s) URL: {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self._scheme = parsed.scheme
        self._host = parsed.host
        self._port = parsed.port
        self._prefix = parsed.path
        self._timeout = timeout
        self._headers = dict(headers or {})
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        # HTTPS checked against the system's CAs, or only against ca_file (a server's own self-signed CA)
        self._ssl = ssl.create_default_context(cafile=str(ca_file)) if ca_file and self._scheme == "https" \
            else None

    def _connection(self) -> http.client.HTTPConnection:
        """The open connection, creating it if needed."""
        if self._conn is None:
            if self._scheme == "https":
                self._conn = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout,
                                                         context=self._ssl)
            else:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        return self._conn

    def request(self, method: str, path: str = "", body: bytes | None = None) -> tuple[int, bytes]:
        """Send one request; returns (status, body). Raises EndpointError when unreachable."""
        headers = {**self._headers, "Connection": "keep-alive"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        with self._lock:
            for attempt in (1, 2):
                try:
                    conn = self._connection()
                    conn.request(method, self._prefix + path, body=body, headers=headers)
                    response = conn.getresponse()
                    return response.status, response.read()
                except (OSError, http.client.HTTPException) as exc:
                    self._drop()
                    if attempt == 2 or isinstance(exc, ConnectionRefusedError | TimeoutError):
                        raise EndpointError(f"{self.base_url}{path}: {_describe(exc)}",
                                            timed_out=isinstance(exc, TimeoutError)) from exc
        raise AssertionError("unreachable")

    def json(self, method: str, path: str, payload: Any = None) -> Any:
        """Request and decode a JSON answer; non-2xx raises EndpointError with Triton's message."""
        body = None if payload is None else json.dumps(payload).encode()
        return self.decoded(path, *self.request(method, path, body))

    def decoded(self, path: str, status: int, raw: bytes) -> Any:
        """The JSON of an answer to `path`; non-2xx raises EndpointError with Triton's message."""
        data = _decode(raw)
        if not 200 <= status < 300:
            message = data.get("error") if isinstance(data, dict) else None
            refused = refusal(str(message), token_sent=bool(self._headers)) if message else None
            if refused:
                raise EndpointError(f"{self.base_url}{path}: {refused}")
            raise EndpointError(f"{self.base_url}{path}: HTTP {status}{': ' + message if message else ''}")
        return data

    def _drop(self) -> None:
        """Forget a broken connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Close the kept-alive connection."""
        with self._lock:
            self._drop()


def _decode(raw: bytes) -> Any:
    """JSON from a body, or None when it is empty or not JSON."""
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _describe(exc: BaseException) -> str:
    """A short human reason for a connection failure."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"{exc.verify_message}: its certificate is signed by no CA trusted here (give --ca FILE)"
    return str(exc) or type(exc).__name__


@dataclass(frozen=True)
class IndexEntry:
    """One row of the repository index."""

    name: str
    version: str
    state: str
    reason: str | None


@dataclass(frozen=True)
class ModelStatistics:
    """What the statistics API says about one model version."""

    name: str
    version: str
    last_inference_s: float | None
    counters: ModelCounters


@dataclass(frozen=True)
class ServerMetadata:
    """Server name, version and extensions (GET v2)."""

    name: str
    version: str
    extensions: tuple[str, ...]


def fetch_health(endpoint: HttpEndpoint) -> tuple[bool, bool]:
    """(live, ready) from the health endpoints (one request when ready); unreachable raises EndpointError."""
    if endpoint.request("GET", "/v2/health/ready")[0] == 200:
        return True, True
    return endpoint.request("GET", "/v2/health/live")[0] == 200, False


def fetch_metadata(endpoint: HttpEndpoint) -> ServerMetadata:
    """The server's metadata."""
    data = endpoint.json("GET", "/v2")
    return ServerMetadata(str(data.get("name", "")), str(data.get("version", "")),
                          tuple(str(e) for e in data.get("extensions", ())))


class IndexReader:
    """The repository index of one server, decoded again only when its body changed: it seldom does, and
    decoding a large repository's rows is most of what the request costs a poll."""

    PATH = "/v2/repository/index"

    def __init__(self) -> None:
        self._body: bytes | None = None
        self._entries: list[IndexEntry] = []

    def read(self, endpoint: HttpEndpoint) -> list[IndexEntry]:
        """Every model in the repository with its state and reason (a fresh list each call)."""
        status, raw = endpoint.request("POST", self.PATH, b"{}")
        if status != 200 or raw != self._body:
            entries = index_entries(endpoint.decoded(self.PATH, status, raw))
            self._body, self._entries = raw, entries
        return list(self._entries)


def index_entries(rows: Any) -> list[IndexEntry]:
    """The repository index's rows as entries (rows that are not objects with a name are left out)."""
    return [
        IndexEntry(
            name=str(row["name"]),
            version=str(row.get("version", "")),
            state=str(row.get("state") or MODEL_UNAVAILABLE),
            reason=str(row["reason"]) if row.get("reason") else None,
        )
        for row in rows or ()
        if isinstance(row, dict) and "name" in row
    ]


def fetch_statistics(endpoint: HttpEndpoint) -> dict[tuple[str, str], ModelStatistics]:
    """Statistics for every loaded model version in one call."""
    data = endpoint.json("GET", "/v2/models/stats") or {}
    found: dict[tuple[str, str], ModelStatistics] = {}
    for entry in data.get("model_stats", ()):
        stats = _statistics_from(entry)
        found[(stats.name, stats.version)] = stats
    return found


def fetch_model_statistics(endpoint: HttpEndpoint, name: str,
                           version: str) -> dict[tuple[str, str], ModelStatistics]:
    """Statistics of one model version (GET v2/models/NAME/versions/V/stats)."""
    quoted = urllib.parse.quote(name, safe="")
    data = endpoint.json("GET", f"/v2/models/{quoted}/versions/{urllib.parse.quote(version, safe='')}/stats")
    found = (_statistics_from(entry) for entry in (data or {}).get("model_stats", ()))
    return {(stats.name, stats.version): stats for stats in found}


def _statistics_from(entry: dict[str, Any]) -> ModelStatistics:
    """One model_stats entry as ModelStatistics (durations converted from ns to us)."""
    inference = entry.get("inference_stats", {})

    def count(key: str) -> float:
        return float(inference.get(key, {}).get("count", 0))

    def micros(key: str) -> float:
        return float(inference.get(key, {}).get("ns", 0)) / NS_PER_US

    counters = ModelCounters(
        success=count("success"),
        failure=count("fail"),
        inference=float(entry.get("inference_count", 0)),
        execution=float(entry.get("execution_count", 0)),
        request_us=micros("success"),
        queue_us=micros("queue"),
        compute_input_us=micros("compute_input"),
        compute_infer_us=micros("compute_infer"),
        compute_output_us=micros("compute_output"),
    )
    last_ms = float(entry.get("last_inference", 0) or 0)
    return ModelStatistics(str(entry.get("name", "")), str(entry.get("version", "")),
                           last_ms / 1000.0 if last_ms > 0 else None, counters)


def fetch_model_config(endpoint: HttpEndpoint, model: str) -> dict[str, Any]:
    """A loaded model's configuration as Triton completed it."""
    quoted = urllib.parse.quote(model, safe="")
    data = endpoint.json("GET", f"/v2/models/{quoted}/config")
    return data if isinstance(data, dict) else {}


def fetch_loaded_config(http_url: str | None, model: str, timeout: float = 3.0,
                        headers: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """Triton's loaded config, sent with the session's token; None when the server or model is silent."""
    if not http_url:
        return None
    try:
        endpoint = HttpEndpoint(http_url, timeout, dict(headers or {}))
    except ValueError:
        return None
    try:
        return fetch_model_config(endpoint, model)
    except EndpointError:
        return None
    finally:
        endpoint.close()
