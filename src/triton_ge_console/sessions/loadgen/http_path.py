"""The HTTP hot path: keep-alive connections that send one prebuilt request and parse replies with llhttp.

A general client (aiohttp) spends ~10x wrk's CPU per request building and tracking each request; here a
request is one `transport.write` of bytes built once, and the reply is parsed by httptools (the llhttp
parser uvicorn uses) without being copied unless it is an error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

import httptools


class HttpRequestFailed(Exception):
    """The connection broke or the reply was not HTTP; the message says which."""


def build_request(host: str, path: str, body: bytes, headers: Mapping[str, str]) -> bytes:
    """A complete HTTP/1.1 keep-alive POST, ready to write as is."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class _ReplyReader(asyncio.Protocol):
    """Feeds replies to httptools and keeps a reply's status, and its body only when it is an error."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.error_body: list[bytes] | None = None

    def data_received(self, data: bytes) -> None:
        """Feed the parser; its callbacks do the rest."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:  # what came, so a rare server fault can be told apart
            self._broken(f"bad HTTP reply: {exc} (in {len(data)} bytes starting {bytes(data[:64])!r})")

    def on_headers_complete(self) -> None:
        """Keep the body only when it explains an error."""
        self.status = self.parser.get_status_code()
        self.error_body = [] if self.status != 200 else None

    def on_body(self, body: bytes) -> None:
        """Collect an error reply's body."""
        if self.error_body is not None:
            self.error_body.append(body)

    def _broken(self, message: str) -> None:
        """The reply was not HTTP: subclasses fail what is in flight."""
        raise NotImplementedError


class _Connection(_ReplyReader):
    """One keep-alive connection with at most one request in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.reusable = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport."""
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def _broken(self, message: str) -> None:
        """A reply that is not HTTP fails the request."""
        self._fail(message)

    def on_message_complete(self) -> None:
        """Hand the status (and error body) to the request."""
        if not self.parser.should_keep_alive():
            self.reusable = False
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result((self.status, b"".join(self.error_body or ())))

    def connection_lost(self, exc: Exception | None) -> None:
        """Fail the request in flight, if any."""
        self.reusable = False
        self._fail(f"connection closed: {exc}" if exc else "connection closed by the server")

    def _fail(self, message: str) -> None:
        """Fail the waiting request and retire the connection."""
        self.reusable = False
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(HttpRequestFailed(message))
        if self.transport is not None:
            self.transport.close()

    async def exchange(self, payload: bytes) -> tuple[int, bytes]:
        """Write the request and wait for the reply's status (and body when it is an error)."""
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(payload)
        try:
            return await self.waiter
        except asyncio.CancelledError:
            self.reusable = False  # the reply would arrive for the next request otherwise
            self.transport.close()
            raise


class ConnectionPool:
    """Idle keep-alive connections to one host:port, opened on demand, reused last-in first-out."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._idle: list[_Connection] = []

    async def exchange(self, payload: bytes) -> tuple[int, bytes]:
        """Send payload on an idle (or new) connection and return (status, error body)."""
        connection = self._idle.pop() if self._idle else await self._open()
        result = await connection.exchange(payload)
        if connection.reusable:
            self._idle.append(connection)
        elif connection.transport is not None:
            connection.transport.close()
        return result

    async def _open(self) -> _Connection:
        """A new connection (asyncio sets TCP_NODELAY on TCP transports)."""
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await loop.create_connection(_Connection, self.host, self.port)
        except OSError as exc:
            raise HttpRequestFailed(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        return protocol

    def close(self) -> None:
        """Close every idle connection."""
        for connection in self._idle:
            if connection.transport is not None:
                connection.transport.close()
        self._idle.clear()


# Closed loop without a future or task per request (most of an asyncio client's cost per request).
class _LoopConnection(_ReplyReader):
    """One virtual user on one connection: each reply's callback times it and writes the next request."""

    def __init__(self, payload: bytes, succeeded: Callable[[float], None],
                 failed: Callable[[str], None], running: Callable[[], bool]) -> None:
        super().__init__()
        self.running = running
        self.payload = payload
        self.succeeded = succeeded
        self.failed = failed
        self.transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.started: float | None = None  # send time of the request in flight
        self.active = True  # False once the driver is cancelled: a closing connection is then no error

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Send the first request."""
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._send()

    def _send(self) -> None:
        """Write the request and note when."""
        assert self.transport is not None
        self.started = time.perf_counter()
        self.transport.write(self.payload)

    def _broken(self, message: str) -> None:
        """A reply that is not HTTP fails the request in flight."""
        self._end(message)

    def on_message_complete(self) -> None:
        """Record the reply, then send again on the same connection (or let the driver reconnect)."""
        latency = time.perf_counter() - (self.started or 0.0)
        self.started = None
        if self.status == 200:
            self.succeeded(latency)
        else:
            self.failed(http_error_text(self.status, b"".join(self.error_body or ())))
        if self.parser.should_keep_alive() and self.running():
            self._send()
        elif self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        """A request in flight failed with the connection; wake the driver to reconnect."""
        if self.started is not None and self.active:
            self._end(f"connection closed: {exc}" if exc else "connection closed by the server")
        if not self.closed.done():
            self.closed.set_result(None)

    def _end(self, message: str) -> None:
        """Fail the request in flight and close."""
        self.started = None
        self.failed(message)
        if self.transport is not None:
            self.transport.close()


async def closed_loop(host: str, port: int, payload: bytes, succeeded: Callable[[float], None],
                      failed: Callable[[str], None], running: Callable[[], bool]) -> None:
    """Keep one request in flight on a keep-alive connection while running(), reconnecting as needed."""
    loop = asyncio.get_running_loop()
    while running():
        try:
            transport, connection = await loop.create_connection(
                lambda: _LoopConnection(payload, succeeded, failed, running), host, port)
        except OSError as exc:
            failed(f"cannot connect to {host}:{port}: {exc}")
            await asyncio.sleep(0)  # a refused connection must not starve the event loop
            continue
        try:
            await connection.closed
        finally:
            connection.active = False
            transport.close()


def http_error_text(status: int, payload: bytes) -> str:
    """Triton's error text from a failed HTTP infer."""
    return f"HTTP {status}: {payload[:500].decode('utf-8', errors='replace')}"
