"""Stream one generation from a generate model, over gRPC (a bidirectional stream) or HTTP (Triton's
`generate_stream`, server-sent events), with the arrival time of every token."""

from __future__ import annotations

import http.client
import json
import queue
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

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
        given = {"temperature": ("FP32", self.temperature), "top_k": ("INT32", self.top_k),
                 "top_p": ("FP32", self.top_p), "seed": ("INT64", self.seed)}
        return {name: (kind, value) for name, (kind, value) in given.items() if value is not None}


@dataclass
class StreamResult:
    """One streamed generation as the client saw it (perf_counter seconds)."""

    sent: float
    tokens: list[int] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    error: str | None = None

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
        if len(self.arrivals) < 2:
            return None
        return (self.arrivals[-1] - self.arrivals[0]) / (len(self.arrivals) - 1)

    @property
    def e2e(self) -> float | None:
        """From sending to the last token."""
        return self.arrivals[-1] - self.sent if self.arrivals else None


def grpc_inputs(generation: Generation) -> list[Any]:
    """The request's tensors for tritonclient.grpc."""
    import tritonclient.grpc as grpcclient

    tensors = []
    values: dict[str, tuple[str, np.ndarray]] = {
        "input_ids": ("INT64", np.asarray(generation.prompt, np.int64)),
        "max_tokens": ("INT32", np.asarray([generation.max_tokens], np.int32))}
    kinds = {"FP32": np.float32, "INT32": np.int32, "INT64": np.int64}
    for name, (kind, value) in generation.optional().items():
        values[name] = (kind, np.asarray([value], kinds[kind]))
    for name, (kind, array) in values.items():
        tensor = grpcclient.InferInput(name, list(array.shape), kind)
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    return tensors


class GrpcStreamer:
    """One gRPC client and its stream; generations run one after another on it."""

    def __init__(self, url: str, model: str, timeout: float = 120.0,
                 headers: dict[str, str] | None = None) -> None:
        import tritonclient.grpc as grpcclient

        self.model = model
        self.timeout = timeout
        self._client = grpcclient.InferenceServerClient(url)
        self._responses: queue.Queue[tuple[Any, Any, float]] = queue.Queue()
        self._client.start_stream(callback=lambda result, error: self._responses.put(
            (result, error, time.perf_counter())), headers=headers)

    def send(self, generation: Generation) -> StreamResult:
        """Send one request; its responses queue up until collected."""
        result = StreamResult(sent=time.perf_counter())
        self._client.async_stream_infer(self.model, grpc_inputs(generation), enable_empty_final_response=True)
        return result

    def generate(self, generation: Generation) -> StreamResult:
        """Send one request and collect its stream up to the final response."""
        result = self.send(generation)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                response, error, arrived = self._responses.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                result.error = f"no final response within {self.timeout:g} s"
                return result
            if error is not None:
                result.error = str(error)
                return result
            token = response.as_numpy("token_id")
            if token is not None and token.size:
                result.tokens.append(int(token.reshape(-1)[0]))
                result.arrivals.append(arrived)
            final = response.get_response().parameters.get(FINAL_PARAMETER)
            if final is not None and final.bool_param:
                return result

    def close(self, cancel: bool = False) -> None:
        """Close the stream (cancelling what it still carries, if asked) and the client."""
        self._client.stop_stream(cancel_requests=cancel)
        self._client.close()


def http_body(generation: Generation) -> bytes:
    """generate_stream's JSON: each input by name (lists for tensors, plain values for [1] scalars)."""
    body: dict[str, Any] = {"input_ids": list(generation.prompt), "max_tokens": generation.max_tokens}
    body.update({name: value for name, (_, value) in generation.optional().items()})
    return json.dumps(body).encode()


def http_generate(host: str, port: int, model: str, generation: Generation,
                  timeout: float = 120.0, headers: dict[str, str] | None = None) -> StreamResult:
    """One generation over HTTP generate_stream: a server-sent event per token."""
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    result = StreamResult(sent=time.perf_counter())
    try:
        connection.request("POST", f"/v2/models/{model}/generate_stream", body=http_body(generation),
                           headers={"Content-Type": "application/json", "Accept": "text/event-stream",
                                    **(headers or {})})
        response = connection.getresponse()
        if response.status != 200:
            result.error = f"HTTP {response.status}: {response.read().decode(errors='replace')[:300]}"
            return result
        for raw in response:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            event = json.loads(line[5:])
            if "error" in event:
                result.error = str(event["error"])
                return result
            token = event.get("token_id")
            result.tokens.append(int(token[0] if isinstance(token, list) else token))
            result.arrivals.append(time.perf_counter())
    except (OSError, http.client.HTTPException, ValueError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        connection.close()
    return result
