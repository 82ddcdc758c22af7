"""One request's generation through the front door: the prompt encoded (the chat rendered through its
template first), sent over Triton's gRPC stream (GrpcStreamer, one per request at a time from a pool),
its tokens decoded into text pieces on a thread of its own, stop sequences cut, and the end told apart:
length, stop, an error, or the client gone (which cancels the generation on the server)."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from triton_ge_console.sessions.frontdoor.catalog import DoorModel
from triton_ge_console.sessions.frontdoor.chat_template import ChatTemplateError
from triton_ge_console.sessions.frontdoor.openai_shapes import (
    COMPLETION_DEFAULT_TOKENS,
    DoorRequest,
    OpenAIError,
    bad,
)
from triton_ge_console.sessions.loadgen.generate_client import Generation, GrpcStreamer, TokenStream

RPC_FAILURE = "[StatusCode."  # how GrpcStreamer words a failed call (Triton unreachable, refused)


@dataclass(frozen=True)
class Prepared:
    """A request made ready to send: its model, prompt ids and Triton generation."""

    model: DoorModel
    generation: Generation

    @property
    def prompt_tokens(self) -> int:
        """The prompt's length in tokens."""
        return len(self.generation.prompt)


def prepare(model: DoorModel, request: DoorRequest) -> Prepared:
    """The prompt's ids and the generation to ask for; OpenAIError for what cannot be sent."""
    if model.codec is None:
        raise bad(model.why_no_text or f"model {model.name!r} has no tokenizer", "model")
    if request.messages is not None:
        try:
            text = model.template.render(request.messages)
        except ChatTemplateError as exc:
            raise bad(str(exc), "messages") from None
        ids = model.codec.encode(text)
    elif isinstance(request.prompt, str):
        ids = model.codec.encode(request.prompt)
    else:
        ids = tuple(request.prompt or ())
    if not ids:
        raise bad("the prompt is empty once tokenized", "messages" if request.chat else "prompt")
    limit = model.max_tokens
    asked = request.max_tokens
    if asked is not None and asked > limit:
        raise bad(f"max_tokens {asked}: model {model.name!r} generates at most {limit} tokens a request",
                  "max_tokens")
    room = limit if model.context is None else max(1, min(limit, model.context - len(ids)))
    default = room if request.chat else min(COMPLETION_DEFAULT_TOKENS, room)
    wanted = asked if asked is not None else default
    return Prepared(model, Generation(ids, wanted, temperature=request.temperature, top_p=request.top_p,
                                      seed=request.seed))


class StopCut:
    """The text so far against the stop sequences: what may be sent now (a possible stop's start is held
    back until it is told apart), and whether one was met (the text ends before it)."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = stops
        self._hold = max((len(stop) - 1 for stop in stops), default=0)
        self.text = ""
        self._sent = 0
        self.met = False

    def add(self, piece: str) -> str:
        """Add a piece; what of the text may be sent now."""
        self.text += piece
        found = [index for stop in self._stops if (index := self.text.find(stop)) >= 0]
        if found:
            self.met, self.text = True, self.text[:min(found)]
            return self.flush()
        safe = max(self._sent, len(self.text) - self._hold)
        out, self._sent = self.text[self._sent:safe], safe
        return out

    def flush(self) -> str:
        """What is left to send."""
        out, self._sent = self.text[self._sent:], len(self.text)
        return out


@dataclass
class Outcome:
    """How a generation ended, known once its pieces are read."""

    completion_tokens: int = 0
    finish: str | None = None  # "stop" | "length"; None while running or after an error
    error: OpenAIError | None = None
    text: list[str] = field(default_factory=list)


_END = object()


class Engine:
    """The streams to Triton, pooled: one request at a time on each."""

    def __init__(self, grpc_url: str, headers: dict[str, str]) -> None:
        self._url, self._headers = grpc_url, headers
        self._free: queue.SimpleQueue[GrpcStreamer] = queue.SimpleQueue()
        self._opened: list[GrpcStreamer] = []
        self._lock = threading.Lock()

    def _streamer(self, model: str) -> GrpcStreamer:
        """A free stream (the model is named per request), or a new one."""
        try:
            streamer = self._free.get_nowait()
        except queue.Empty:
            streamer = GrpcStreamer(self._url, model, headers=self._headers, timeout=3600.0)
            with self._lock:
                self._opened.append(streamer)
        streamer.model = model
        return streamer

    async def pieces(self, prepared: Prepared, request: DoorRequest, outcome: Outcome) -> AsyncIterator[str]:
        """The text pieces as they come (stops cut), one a token even when it adds no text yet (half a
        character, or text held back as a stop's possible start), as vLLM streams a chunk a token; `outcome`
        filled at the end. Closing the iterator early (the client went away) cancels the generation on the
        server."""
        loop = asyncio.get_running_loop()
        arrived: asyncio.Queue[object] = asyncio.Queue()
        streamer = self._streamer(prepared.model.name)
        stream = streamer.stream(prepared.generation)
        thread = threading.Thread(target=self._pump, args=(stream, prepared, streamer, loop, arrived),
                                  name="frontdoor-stream", daemon=True)
        thread.start()
        cut = StopCut(request.stop)
        try:
            while (item := await arrived.get()) is not _END:
                assert isinstance(item, tuple)
                is_token, piece = item
                outcome.completion_tokens += is_token  # the tokens the text holds (the pump reads ahead)
                sendable = cut.add(piece)
                if sendable:
                    outcome.text.append(sendable)
                if sendable or (is_token and not cut.met):  # the stop's token: the end's chunk says it
                    yield sendable
                if cut.met:
                    stream.cancel()
                    outcome.finish = "stop"
                    return
            rest = cut.flush()
            if rest:
                outcome.text.append(rest)
                yield rest
            outcome.error = _error(stream.result.error)
            if outcome.error is None:
                full = outcome.completion_tokens >= prepared.generation.max_tokens
                outcome.finish = "stop" if cut.met or not full else "length"
        finally:
            stream.cancel()

    def _pump(self, stream: TokenStream, prepared: Prepared, streamer: GrpcStreamer,
              loop: asyncio.AbstractEventLoop, arrived: asyncio.Queue[object]) -> None:
        """On its own thread: each token's text piece into the queue, (True, piece), then what the ids still
        owed, (False, piece)."""
        assert prepared.model.codec is not None
        text = prepared.model.codec.stream()
        try:
            for token in stream:
                loop.call_soon_threadsafe(arrived.put_nowait, (True, text.piece(token, final=False)))
            loop.call_soon_threadsafe(arrived.put_nowait, (False, text.rest()))
        finally:
            self._free.put(streamer)
            if not loop.is_closed():
                loop.call_soon_threadsafe(arrived.put_nowait, _END)

    def close(self) -> None:
        """Close every stream, cancelling what still runs."""
        with self._lock:
            for streamer in self._opened:
                streamer.close(cancel=True)
            self._opened.clear()


def _error(message: str | None) -> OpenAIError | None:
    """Triton's error for a generation in OpenAI's shape: the model's refusal a 400, a failed call 502."""
    if message is None:
        return None
    if message.startswith(RPC_FAILURE):
        return OpenAIError(502, f"Triton: {message}", kind="server_error")
    return bad(f"Triton: {message}")
