"""Stream one generation from a generate model, over gRPC (a bidirectional stream) or HTTP (Triton's
`generate_stream`, server-sent events), with the arrival time of every token."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from triton_ge_console.backend_glue.generate_protocol import DATA_TYPES

FINAL_PARAMETER = "triton_final_response"  # what Triton's gRPC stream adds with enable_empty_final_response


@dataclass(frozen=True)
class Generation:
    """What to ask for: prompt ids, how many tokens, and sampling (temperature 0: greedy)."""

    prompt: tuple[int, ...]
    max_tokens: int
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None

    def optional(self) -> dict[str, tuple[str, int | float]]:
        """The sampling inputs given: name → (Triton type, value)."""
        given = {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p, "seed": self.seed}
        return {name: (DATA_TYPES[name], value) for name, value in given.items() if value is not None}


@dataclass
class StreamResult:
    """One streamed generation as the client saw it (perf_counter seconds)."""

    sent: float
    tokens: list[int] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    error: str | None = None
    prompt_tokens: int = 0
    counted: int | None = None  # output tokens as the server counted them (OpenAI's usage), when it says
    text: str = ""  # the text_output pieces joined, from a model with a tokenizer
    with_text: bool = False  # its responses carried text_output: the model has a tokenizer

    @property
    def output_tokens(self) -> int:
        """Tokens generated: the server's count when it gave one (an OpenAI chunk may carry several)."""
        return self.counted if self.counted is not None else len(self.tokens)

    @property
    def ttft(self) -> float | None:
        """Time to first token."""
        return self.arrivals[0] - self.sent if self.arrivals else None

    @property
    def itls(self) -> list[float]:
        """Intervals between consecutive tokens."""
        return [b - a for a, b in zip(self.arrivals, self.arrivals[1:], strict=False)]

    @property
    def itl(self) -> float | None:
        """Inter-token latency as genai-perf counts it: (e2e - TTFT) / (tokens - 1), one per generation;
        None with fewer than two tokens."""
        if len(self.arrivals) < 2 or self.output_tokens < 2:
            return None
        return (self.arrivals[-1] - self.arrivals[0]) / (self.output_tokens - 1)

    @property
    def e2e(self) -> float | None:
        """From sending to the last token."""
        return self.arrivals[-1] - self.sent if self.arrivals else None


_DTYPES = {"FP32": np.float32, "INT64": np.int64}  # the types generate_protocol declares
# Triton's gRPC service; the stream is declared bidirectional, but one request then the client's half-close
# is the same on the wire as a server stream, which grpcio reads on the caller's thread with no other.
STREAM_METHOD = "/inference.GRPCInferenceService/ModelStreamInfer"
MAX_MESSAGE = 2**31 - 1  # Triton's own bound (tritonclient's channel uses it too)


def grpc_request(model: str, generation: Generation) -> Any:
    """The request's protobuf, its tensors as raw contents, asking for the empty final response."""
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name=model)
    request.parameters["triton_enable_empty_final_response"].bool_param = True
    values: dict[str, tuple[str, np.ndarray]] = {
        "input_ids": ("INT64", np.asarray(generation.prompt, np.int64)),
        "max_tokens": (DATA_TYPES["max_tokens"], np.asarray([generation.max_tokens], np.int64))}
    for name, (kind, value) in generation.optional().items():
        values[name] = (kind, np.asarray([value], _DTYPES[kind]))
    for name, (kind, array) in values.items():
        request.inputs.add(name=name, datatype=kind, shape=array.shape)
        request.raw_input_contents.append(array.tobytes())
    return request


def _rpc_error(error: Any, timeout: float) -> str:
    """A failed call in tritonclient's words ("[StatusCode.X] details"); a deadline as our own line."""
    import grpc

    if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"no final response within {timeout:g} s"
    return f"[{error.code()}] {error.details()}"


def _token(answer: Any) -> tuple[int | None, str | None]:
    """The token id a ModelInferResponse carries (its raw token_id output) and its text piece (text_output,
    from a model with a tokenizer): None, None in the empty final one."""
    from tritonclient.utils import deserialize_bytes_tensor, triton_to_np_dtype

    token, piece = None, None
    for output, raw in zip(answer.outputs, answer.raw_output_contents, strict=False):
        if output.name == "token_id":
            ids = np.frombuffer(raw, triton_to_np_dtype(output.datatype))
            token = int(ids[0]) if ids.size else None
        elif output.name == "text_output":
            pieces = deserialize_bytes_tensor(raw)
            piece = bytes(pieces[0]).decode("utf-8", "replace") if pieces.size else None
    return token, piece


class TokenStream:
    """One sent generation, read token by token on the calling thread; cancel() (from any thread) ends
    it on the server, and the read then stops with the result's error saying so."""

    def __init__(self, streamer: GrpcStreamer, result: StreamResult, call: Any) -> None:
        self.result = result
        self._streamer = streamer
        self._call = call

    def __iter__(self) -> Iterator[int]:
        try:
            yield from self._streamer._responses(self._call, self.result)
        finally:
            self._streamer._forget(self._call)

    def cancel(self) -> None:
        """Cancel the call (nothing when it has ended)."""
        self._call.cancel()


class GrpcStreamer:
    """One gRPC channel; generations run one after another on it, each a ModelStreamInfer call of one
    request read on the calling thread (no callback thread or queue: the client's CPU competes with
    the server's on a small host)."""

    def __init__(self, url: str, model: str, timeout: float = 120.0,
                 headers: dict[str, str] | None = None,
                 on_token: Callable[[StreamResult], None] | None = None) -> None:
        import grpc
        import grpc.experimental
        from tritonclient.grpc import service_pb2

        self.model = model
        self.on_token = on_token  # called (on the reading thread) as each token arrives: a live view of it
        self.timeout = timeout
        self._metadata = tuple((key.lower(), value) for key, value in (headers or {}).items())
        self._channel = grpc.insecure_channel(url, options=[
            ("grpc.max_send_message_length", MAX_MESSAGE), ("grpc.max_receive_message_length", MAX_MESSAGE),
            (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1)])
        self._stream = self._channel.unary_stream(
            STREAM_METHOD, request_serializer=service_pb2.ModelInferRequest.SerializeToString,
            response_deserializer=service_pb2.ModelStreamInferResponse.FromString)
        # the requests sent and not yet collected, with the result each fills: for close to end
        self._pending: list[tuple[StreamResult, Any]] = []

    def send(self, generation: Generation) -> StreamResult:
        """Send one request (cancelled if it has not ended within the timeout); its responses wait on
        the call until close() collects them into the result returned here."""
        return self._send(generation)[0]

    def generate(self, generation: Generation) -> StreamResult:
        """Send one request and collect its stream up to the final response."""
        pending = self._send(generation)
        try:
            self._collect(pending[1], pending[0])
        finally:
            self._pending.remove(pending)
        return pending[0]

    def _send(self, generation: Generation) -> tuple[StreamResult, Any]:
        """The result to fill, and the call carrying the request."""
        result = StreamResult(sent=time.perf_counter(), prompt_tokens=len(generation.prompt))
        call = self._stream(grpc_request(self.model, generation), timeout=self.timeout,
                            metadata=self._metadata)
        self._pending.append((result, call))
        return result, call

    def stream(self, generation: Generation) -> TokenStream:
        """Send one request and hand back its tokens to read one by one as they arrive (the front door's
        way): cancellable from another thread, which ends the generation on the server."""
        result, call = self._send(generation)
        return TokenStream(self, result, call)

    def _collect(self, call: Any, result: StreamResult) -> None:
        """The call's whole stream into the result."""
        for _ in self._responses(call, result):
            pass

    def _responses(self, call: Any, result: StreamResult) -> Iterator[int]:
        """Each response's token (also recorded with its arrival time) up to the final one, or the
        request's error; then the call's end (Triton ends it once the request has ended): read, not left
        for a cancel."""
        import grpc

        ended = False
        try:
            for response in call:
                arrived = time.perf_counter()
                if response.error_message:
                    result.error, ended = response.error_message, True
                    break
                answer = response.infer_response
                token, piece = _token(answer)
                if token is not None:
                    result.tokens.append(token)
                    result.arrivals.append(arrived)
                    if piece is not None:
                        result.text += piece
                        result.with_text = True
                    if self.on_token is not None:
                        self.on_token(result)
                    yield token
                if FINAL_PARAMETER in answer.parameters and answer.parameters[FINAL_PARAMETER].bool_param:
                    ended = True
                    break
            else:
                result.error, ended = "the stream ended before the final response", True
            for _ in call:
                pass
        except grpc.RpcError as error:
            if not ended:
                result.error = _rpc_error(error, self.timeout)

    def _forget(self, call: Any) -> None:
        """A call read to its end is no longer close()'s to collect."""
        self._pending[:] = [pending for pending in self._pending if pending[1] is not call]

    def close(self, cancel: bool = False) -> None:
        """Close the channel, first cancelling the requests it still carries if asked, else letting
        them run to their end, each collected into the result send() returned."""
        for result, call in list(self._pending):
            if cancel:
                call.cancel()
            else:
                self._collect(call, result)
        self._pending.clear()
        self._channel.close()


def http_body(generation: Generation) -> bytes:
    """generate_stream's JSON: each input by name (lists for tensors, plain values for [1] scalars)."""
    body: dict[str, Any] = {"input_ids": list(generation.prompt), "max_tokens": generation.max_tokens}
    body.update({name: value for name, (_, value) in generation.optional().items()})
    return json.dumps(body).encode()


def _sse_generation(host: str, port: int, path: str, body: bytes, generation: Generation, timeout: float,
                    headers: dict[str, str] | None, on_event: Callable[[dict[str, Any], StreamResult], bool],
                    kept: http.client.HTTPConnection | None = None) -> StreamResult:
    """POST a streamed request and hand each server-sent event (its JSON) to on_event, which records it
    and says whether the stream goes on; an HTTP error or a broken stream is the result's error. On a
    `kept` connection (keep-alive, as OpenAI clients and AIPerf pool theirs) a generation read to its end
    leaves it open for the next; otherwise, and after any failure, the connection is closed."""
    connection = kept if kept is not None else http.client.HTTPConnection(host, port, timeout=timeout)
    result = StreamResult(sent=time.perf_counter(), prompt_tokens=len(generation.prompt))
    whole = False
    try:
        connection.request("POST", path, body=body, headers={
            "Content-Type": "application/json", "Accept": "text/event-stream", **(headers or {})})
        response = connection.getresponse()
        if response.status != 200:
            result.error = f"HTTP {response.status}: {response.read().decode(errors='replace')[:300]}"
            return result
        for raw in response:
            line = raw.strip()
            if line.startswith(b"data:") and line[5:].strip() != b"[DONE]" and \
                    not on_event(json.loads(line[5:]), result):
                break
        else:
            whole = True
    except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        if kept is None or not whole:
            connection.close()  # a kept one reconnects on its next request
    return result


class HttpStreamer:
    """One kept-alive HTTP connection for a stream of generations, one after another."""

    def __init__(self, host: str, port: int, timeout: float = 120.0) -> None:
        self.connection = http.client.HTTPConnection(host, port, timeout=timeout)

    def close(self, cancel: bool = False) -> None:
        """Close the connection, as GrpcStreamer.close: here a generation is read by its caller, so none is
        left to run to its end, and one still reading ends with an error, `cancel` or not."""
        self.connection.close()


def _generate_stream_event(event: dict[str, Any], result: StreamResult) -> bool:
    """One generate_stream event: a token, or the error that ends the stream."""
    if "error" in event:
        result.error = str(event["error"])
        return False
    token = event["token_id"]
    result.tokens.append(int(token[0] if isinstance(token, list) else token))
    result.arrivals.append(time.perf_counter())
    piece = event.get("text_output")
    if piece is not None:
        result.text += str(piece[0] if isinstance(piece, list) else piece)
        result.with_text = True
    return True


def http_generate(host: str, port: int, model: str, generation: Generation, timeout: float = 120.0,
                  headers: dict[str, str] | None = None, kept: HttpStreamer | None = None) -> StreamResult:
    """One generation over HTTP generate_stream: a server-sent event per token."""
    return _sse_generation(host, port, f"/v2/models/{model}/generate_stream", http_body(generation),
                           generation, timeout, headers, _generate_stream_event,
                           None if kept is None else kept.connection)


def http_generate_text(host: str, port: int, model: str, text: str, max_tokens: int, timeout: float = 120.0,
                       headers: dict[str, str] | None = None) -> StreamResult:
    """One generation from a text prompt (a model with a tokenizer) over HTTP generate_stream, its text
    pieces joined into the result's text."""
    body = json.dumps({"text_input": text, "max_tokens": max_tokens}).encode()
    return _sse_generation(host, port, f"/v2/models/{model}/generate_stream", body,
                           Generation((), max_tokens), timeout, headers, _generate_stream_event)


def openai_body(model: str, generation: Generation) -> bytes:
    """A streamed /v1/completions request for the generation: its prompt as token ids, usage asked for
    (top_k has no OpenAI field and is left out)."""
    body: dict[str, Any] = {"model": model, "prompt": list(generation.prompt),
                            "max_tokens": generation.max_tokens, "stream": True,
                            "stream_options": {"include_usage": True}}
    body.update({name: value for name, (_, value) in generation.optional().items() if name != "top_k"})
    return json.dumps(body).encode()


def _openai_event(event: dict[str, Any], result: StreamResult) -> bool:
    """One OpenAI chunk: a piece of text (its arrival timed; ids are not in OpenAI's chunks), the usage's
    count, or the error that ends the stream."""
    if "error" in event:
        result.error = str((event["error"] or {}).get("message", event["error"]))
        return False
    if any(choice.get("text") for choice in event.get("choices") or ()):
        result.tokens.append(-1)
        result.arrivals.append(time.perf_counter())
    if event.get("usage"):
        result.counted = int(event["usage"]["completion_tokens"])
    return True


def openai_generate(host: str, port: int, base_path: str, model: str, generation: Generation,
                    timeout: float = 120.0, headers: dict[str, str] | None = None,
                    kept: HttpStreamer | None = None) -> StreamResult:
    """One generation through an OpenAI-compatible API's /v1/completions (`ge-console openai`'s)."""
    return _sse_generation(host, port, f"{base_path.rstrip('/')}/completions", openai_body(model, generation),
                           generation, timeout, headers, _openai_event,
                           None if kept is None else kept.connection)
