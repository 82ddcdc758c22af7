"""The HTTP hot path against a server whose reply is not HTTP: one clear error naming what came."""

from __future__ import annotations

import asyncio

import pytest

from triton_ge_console.sessions.loadgen.http_path import ConnectionPool, HttpRequestFailed, build_request


def test_a_reply_that_is_not_http_fails_the_request_saying_what_came() -> None:
    """A reply with a malformed header line fails its request with the parser's words and the bytes that
    came (a rare fault seen once under load could not be told apart without them)."""
    async def scenario() -> str:
        async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nBad Header Line\r\n\r\n")
            await writer.drain()
            await reader.read()  # until the client closes
            writer.close()

        server = await asyncio.start_server(reply, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pool = ConnectionPool("127.0.0.1", port)
        try:
            with pytest.raises(HttpRequestFailed) as failed:
                await pool.exchange(build_request(f"127.0.0.1:{port}", "/v2/models/m/infer", b"{}", {}))
            return str(failed.value)
        finally:
            pool.close()
            server.close()
            await server.wait_closed()

    message = asyncio.run(scenario())
    assert message.startswith("bad HTTP reply: ") and "b'HTTP/1.1 200 OK\\r\\nBad Header Line" in message
