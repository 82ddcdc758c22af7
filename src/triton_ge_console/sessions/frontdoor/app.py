"""The front door's web app (Starlette): the routes, the token guard (`Authorization: Bearer TOKEN` when the
session has a token), JSON or server-sent events, and every failure in OpenAI's error shape."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from triton_ge_console.sessions.frontdoor.catalog import Catalog, DoorModel, EndpointError
from triton_ge_console.sessions.frontdoor.engine import Engine, Outcome, Prepared, prepare
from triton_ge_console.sessions.frontdoor.openai_shapes import (
    DoorRequest,
    OpenAIError,
    Reply,
    model_list,
    read_request,
    usage,
)

Handler = Callable[[Request], Awaitable[Response]]


def error_response(error: OpenAIError) -> JSONResponse:
    """An error as OpenAI sends it."""
    return JSONResponse(error.body(), status_code=error.status)


def _guarded(token: str | None, handler: Handler) -> Handler:
    """The handler behind the session's token (none: open), every failure in OpenAI's shape."""

    async def guarded(request: Request) -> Response:
        """The token checked in constant time, then the handler, its errors as OpenAI's JSON."""
        if token is not None:
            given = request.headers.get("authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), token.encode()):
                return error_response(OpenAIError(
                    401, "this front door needs the session's token: Authorization: Bearer TOKEN",
                    kind="invalid_request_error", code="invalid_api_key"))
        try:
            return await handler(request)
        except OpenAIError as error:
            return error_response(error)
        except EndpointError as exc:
            return error_response(OpenAIError(502, f"Triton did not answer: {exc}", kind="server_error"))

    return guarded


class FrontDoor:
    """The app's state: the session's models and the streams to its Triton."""

    def __init__(self, catalog: Catalog, engine: Engine) -> None:
        self.catalog, self.engine = catalog, engine
        self.started = int(time.time())

    async def list_models(self, request: Request) -> Response:
        """GET /v1/models: the ready generate models."""
        models = await run_in_threadpool(self.catalog.models)
        return JSONResponse(model_list([model.name for model in models], self.started))

    async def completions(self, request: Request) -> Response:
        """POST /v1/completions."""
        return await self._generate(request, chat=False)

    async def chat(self, request: Request) -> Response:
        """POST /v1/chat/completions."""
        return await self._generate(request, chat=True)

    async def _generate(self, request: Request, chat: bool) -> Response:
        """Read, prepare and answer one request, streamed or whole."""
        try:
            body = json.loads(await request.body())
        except ValueError:
            raise OpenAIError(400, "the body is not JSON") from None
        asked = read_request(body, chat)
        model = await self._model(asked.model)
        prepared = await run_in_threadpool(prepare, model, asked)
        outcome = Outcome()
        pieces = self.engine.pieces(prepared, asked, outcome)
        first = await _first(pieces, outcome)  # an error before any token is still an HTTP error
        reply = Reply(asked)
        if not asked.stream:
            if not await _whole(pieces, request):
                return Response(status_code=499)  # nobody reads it: the client went away
            if outcome.error is not None:
                raise outcome.error
            used = usage(prepared.prompt_tokens, outcome.completion_tokens)
            return JSONResponse(reply.whole("".join(outcome.text), outcome.finish or "stop", used))
        return StreamingResponse(_events(reply, prepared, first, pieces, outcome),
                                 media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    async def _model(self, name: str) -> DoorModel:
        """The named generate model, or a 404 naming the ones there are."""
        model = await run_in_threadpool(self.catalog.get, name)
        if model is None:
            names = [m.name for m in await run_in_threadpool(self.catalog.models)]
            raise OpenAIError(404, f"model {name!r} is not a ready generate model of this session "
                                   f"(there are: {', '.join(names) or 'none'})", param="model",
                              code="model_not_found")
        return model

    def routes(self, token: str | None) -> list[Route]:
        """The API's routes, guarded."""
        return [Route("/v1/models", _guarded(token, self.list_models), methods=["GET"]),
                Route("/v1/completions", _guarded(token, self.completions), methods=["POST"]),
                Route("/v1/chat/completions", _guarded(token, self.chat), methods=["POST"])]


async def _first(pieces: AsyncIterator[str], outcome: Outcome) -> str | None:
    """The first piece (None: the generation ended without one); its error raised."""
    try:
        first: str | None = await pieces.__anext__()
    except StopAsyncIteration:
        first = None
    if outcome.error is not None:
        raise outcome.error
    return first


DISCONNECT_CHECK_S = 0.5  # how often a whole (not streamed) request looks whether its client is still there


async def _whole(pieces: AsyncIterator[str], request: Request) -> bool:
    """Read every piece; False when the client went away first, which cancels the generation (the task
    reading the pieces is cancelled, and closing them cancels the stream)."""
    async def drain() -> None:
        """Read the pieces to their end, as its own task so a client gone can cancel it."""
        async for _ in pieces:
            pass

    reading = asyncio.ensure_future(drain())
    while not reading.done():
        await asyncio.wait({reading}, timeout=DISCONNECT_CHECK_S)
        if not reading.done() and await request.is_disconnected():
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading
            await pieces.aclose()  # type: ignore[attr-defined]
            return False
    reading.result()
    return True


def _sse(data: dict[str, Any] | str) -> bytes:
    """One server-sent event."""
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()


async def _events(reply: Reply, prepared: Prepared, first: str | None, pieces: AsyncIterator[str],
                  outcome: Outcome) -> AsyncIterator[bytes]:
    """The stream: the role (chat), each piece, the end with its reason, usage if asked, [DONE]; the
    client going away closes `pieces`, which cancels the generation."""
    chat = reply.request.chat
    try:
        if chat:
            yield _sse(reply.chunk(None, first=True))
        if first is not None:
            yield _sse(reply.chunk(first))
        async for piece in pieces:
            yield _sse(reply.chunk(piece))
        if outcome.error is not None:
            yield _sse(outcome.error.body())
        else:
            yield _sse(reply.chunk(None, finish=outcome.finish or "stop"))
            if reply.request.include_usage:
                yield _sse(reply.usage_chunk(usage(prepared.prompt_tokens, outcome.completion_tokens)))
        yield _sse("[DONE]")
    finally:
        await pieces.aclose()  # type: ignore[attr-defined]


def build_app(catalog: Catalog, engine: Engine, token: str | None) -> Starlette:
    """The ASGI app over a session's catalog and engine."""
    door = FrontDoor(catalog, engine)
    return Starlette(routes=door.routes(token))


__all__ = ["DoorRequest", "build_app"]
