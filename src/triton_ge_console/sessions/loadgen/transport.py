"""The load generator's wire: reused connections per protocol and a request serialized once.

Metadata, config and statistics go through tritonclient's aio clients; the hot path sends a request
body (HTTP) or protobuf message (gRPC) built once up front, so a request costs one send and one read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import aiohttp
import grpc
import numpy as np
import tritonclient.grpc.aio as grpc_aio
import tritonclient.http as httpclient
import tritonclient.http.aio as http_aio
from tritonclient.grpc import service_pb2
from tritonclient.utils import InferenceServerException, serialize_byte_tensor

from triton_ge_console.errors import GeConsoleError, InputError
from triton_ge_console.sessions.loadgen.http_path import (
    ConnectionPool,
    HttpRequestFailed,
    build_request,
    closed_loop,
    http_error_text,
)
from triton_ge_console.sessions.loadgen.inputs import (
    LoadSpecError,
    ModelSignature,
    RequestTensor,
    signature_from_metadata,
)
from triton_ge_console.sessions.server.access import refusal
from triton_ge_console.triton_terms import MODEL_READY, host_port, parse_endpoint

GRPC_MAX_MESSAGE = 2**31 - 1
# The hot path's one RPC, called without a response deserializer: the reply stays the bytes gRPC received
# (a failure arrives as the call's status, never in the message), so a large output is not parsed into a
# protobuf, a copy of every output byte the load generator would only throw away.
MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"
PROTOCOLS = ("grpc", "http")


class LoadError(GeConsoleError, RuntimeError):
    """The server could not be reached or refused the load: a runtime failure."""


class UnknownModelError(LoadError):
    """The server does not serve the model asked for (not in its repository, or not loaded)."""


@dataclass(frozen=True)
class StatsTotals:
    """Cumulative counters from v2/models/{m}/stats, summed over the model's versions."""

    success: int = 0
    fail: int = 0
    queue_ns: int = 0
    queue_count: int = 0
    input_ns: int = 0
    input_count: int = 0
    infer_ns: int = 0
    infer_count: int = 0
    output_ns: int = 0
    output_count: int = 0


STATS_FIELDS = {"queue": "queue", "compute_input": "input", "compute_infer": "infer",
                "compute_output": "output"}


def stats_totals(payload: Mapping[str, Any]) -> StatsTotals:
    """Totals from a statistics response (gRPC JSON carries int64 as strings; zero fields are omitted)."""
    sums: dict[str, int] = dict.fromkeys(StatsTotals.__dataclass_fields__, 0)
    for model in payload.get("model_stats", ()):
        stats = model.get("inference_stats", {})
        sums["success"] += int(stats.get("success", {}).get("count", 0))
        sums["fail"] += int(stats.get("fail", {}).get("count", 0))
        for key, short in STATS_FIELDS.items():
            sums[f"{short}_ns"] += int(stats.get(key, {}).get("ns", 0))
            sums[f"{short}_count"] += int(stats.get(key, {}).get("count", 0))
    return StatsTotals(**sums)


@dataclass(frozen=True)
class RequestOptions:
    """Per-request settings Triton's scheduler reads: a priority level and a queue timeout."""

    priority: int = 0  # 0: the model's default priority level
    timeout_us: int = 0  # 0: none (the model's default_timeout_microseconds alone)


class Transport(Protocol):
    """One protocol's connection to a server, for one model."""

    async def signature(self, model: str) -> ModelSignature:
        """The model's inputs, outputs and max batch size; UnknownModelError if not served."""
        ...

    async def statistics(self, model: str) -> StatsTotals | None:
        """Cumulative statistics now, or None when the server would not say."""
        ...

    async def server_version(self) -> str | None:
        """The server's version from its metadata, or None when it would not say."""
        ...

    def prepare(self, model: str, tensors: tuple[RequestTensor, ...], outputs: tuple[str, ...],
                options: RequestOptions = RequestOptions()) -> None:
        """Serialize the request once; every infer() sends it."""
        ...

    async def infer(self) -> None:
        """Send the prepared request and read the whole response; raises InferenceFailed on error."""
        ...

    async def closed_loop(self, succeeded: Callable[[float], None], failed: Callable[[str], None],
                          running: Callable[[], bool]) -> None:
        """One virtual user until cancelled: send, record the latency (or the error), send again."""
        ...

    async def close(self) -> None:
        """Close connections."""
        ...


class InferenceFailed(Exception):
    """One request failed; the message is the server's."""


def _not_found(exc: InferenceServerException) -> bool:
    """Whether Triton's error says the model is unknown or not loaded."""
    text = (exc.message() or "").lower()
    return "unknown model" in text or "not found" in text or "is not ready" in text


def _unknown_model(model: str, url: str, exc: InferenceServerException, ready: list[str] | None
                   ) -> UnknownModelError:
    """An UnknownModelError with Triton's own words and, when known, the models that are READY."""
    served = "" if ready is None else f" (READY: {', '.join(ready) or 'none'})"
    return UnknownModelError(f"model {model!r} is not served at {url}: {exc.message()}{served}")


def ready_models(index: Any) -> list[str]:
    """Names of READY models in a repository index (HTTP list, or gRPC JSON with a 'models' list)."""
    entries = index.get("models", []) if isinstance(index, Mapping) else index or []
    return sorted({str(e["name"]) for e in entries if e.get("state") == MODEL_READY and "name" in e})


def _unreachable(url: str, exc: BaseException, token_sent: bool = False) -> LoadError:
    """A LoadError naming the address that failed (a refused or missing token said so)."""
    detail = (exc.message() if isinstance(exc, InferenceServerException) else str(exc)) or ""
    refused = refusal(detail, token_sent)
    return LoadError(f"{url}: {refused}" if refused else f"cannot talk to Triton at {url}: {detail}")


class GrpcTransport:
    """gRPC through one HTTP/2 channel shared by every in-flight request."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None) -> None:
        self.url = url
        self.headers = dict(headers or {})
        self._metadata = tuple((k.lower(), v) for k, v in self.headers.items())
        self._control = grpc_aio.InferenceServerClient(url)
        options = [("grpc.max_send_message_length", GRPC_MAX_MESSAGE),
                   ("grpc.max_receive_message_length", GRPC_MAX_MESSAGE)]
        self._channel = grpc.aio.insecure_channel(url, options=options)
        self._infer = self._channel.unary_unary(
            MODEL_INFER, request_serializer=service_pb2.ModelInferRequest.SerializeToString,
            response_deserializer=None)
        self._request: service_pb2.ModelInferRequest | None = None

    async def signature(self, model: str) -> ModelSignature:
        """Metadata plus config through the gRPC control client."""
        try:
            metadata = await self._control.get_model_metadata(model, headers=self.headers, as_json=True)
            config = await self._control.get_model_config(model, headers=self.headers, as_json=True)
        except InferenceServerException as exc:
            if _not_found(exc):
                raise _unknown_model(model, self.url, exc, await self._ready()) from exc
            raise _unreachable(self.url, exc, bool(self.headers)) from exc
        return signature_from_metadata(metadata, config.get("config", {}))

    async def _ready(self) -> list[str] | None:
        """READY models per the repository index, None if it cannot be read."""
        try:
            return ready_models(await self._control.get_model_repository_index(headers=self.headers,
                                                                               as_json=True))
        except InferenceServerException:
            return None

    async def server_version(self) -> str | None:
        """Server metadata through the gRPC control client."""
        try:
            metadata = await self._control.get_server_metadata(headers=self.headers, as_json=True)
        except InferenceServerException:
            return None
        return str(metadata["version"]) if metadata.get("version") else None

    async def statistics(self, model: str) -> StatsTotals | None:
        """Statistics through the gRPC control client."""
        try:
            return stats_totals(await self._control.get_inference_statistics(model, headers=self.headers,
                                                                              as_json=True))
        except InferenceServerException:
            return None

    def prepare(self, model: str, tensors: tuple[RequestTensor, ...], outputs: tuple[str, ...],
                options: RequestOptions = RequestOptions()) -> None:
        """A ModelInferRequest with raw input contents (and priority / timeout parameters), built once."""
        request = service_pb2.ModelInferRequest(model_name=model)
        if options.priority:
            request.parameters["priority"].uint64_param = options.priority
        if options.timeout_us:
            request.parameters["timeout"].int64_param = options.timeout_us
        for tensor in tensors:
            request.inputs.add(name=tensor.name, datatype=tensor.datatype, shape=list(tensor.array.shape))
            request.raw_input_contents.append(_raw_bytes(tensor))
        for name in outputs:
            request.outputs.add(name=name)
        self._request = request

    async def infer(self) -> None:
        """One ModelInfer call on the shared channel."""
        try:
            await self._infer(self._request, metadata=self._metadata or None)
        except grpc.aio.AioRpcError as exc:
            raise InferenceFailed(exc.details() or str(exc.code())) from None

    async def closed_loop(self, succeeded: Callable[[float], None], failed: Callable[[str], None],
                          running: Callable[[], bool]) -> None:
        """Await each call in turn (gRPC multiplexes every virtual user on the one channel)."""
        call, request, metadata = self._infer, self._request, self._metadata or None
        while running():
            started = time.perf_counter()
            try:
                await call(request, metadata=metadata)
            except grpc.aio.AioRpcError as exc:
                failed(exc.details() or str(exc.code()))
                await asyncio.sleep(0)  # a failing server must not starve the event loop
            else:
                succeeded(time.perf_counter() - started)

    async def close(self) -> None:
        """Close both channels."""
        await self._channel.close()
        await self._control.close()


class HttpTransport:
    """HTTP/1.1 keep-alive connections (one per in-flight request) sending one prebuilt request."""

    def __init__(self, url: str, json_body: bool = False, headers: Mapping[str, str] | None = None) -> None:
        self.url = url
        self.json_body = json_body
        self.headers = dict(headers or {})
        self._control = http_aio.InferenceServerClient(url)
        endpoint = parse_endpoint(url, schemes=("tcp",), strict=False)
        self._pool = ConnectionPool(endpoint.host or "127.0.0.1", endpoint.port or 80)
        self._request = b""

    async def signature(self, model: str) -> ModelSignature:
        """Metadata plus config through the HTTP control client."""
        try:
            metadata = await self._control.get_model_metadata(model, headers=self.headers)
            config = await self._control.get_model_config(model, headers=self.headers)
        except InferenceServerException as exc:
            if _not_found(exc):
                raise _unknown_model(model, self.url, exc, await self._ready()) from exc
            raise _unreachable(self.url, exc, bool(self.headers)) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise _unreachable(self.url, exc, bool(self.headers)) from exc
        return signature_from_metadata(metadata, config)

    async def _ready(self) -> list[str] | None:
        """READY models per the repository index, None if it cannot be read."""
        try:
            return ready_models(await self._control.get_model_repository_index(headers=self.headers))
        except (InferenceServerException, aiohttp.ClientError, OSError):
            return None

    async def server_version(self) -> str | None:
        """Server metadata through the HTTP control client."""
        try:
            metadata = await self._control.get_server_metadata(headers=self.headers)
        except (InferenceServerException, aiohttp.ClientError, OSError):
            return None
        return str(metadata["version"]) if metadata.get("version") else None

    async def statistics(self, model: str) -> StatsTotals | None:
        """Statistics through the HTTP control client."""
        try:
            return stats_totals(await self._control.get_inference_statistics(model, headers=self.headers))
        except (InferenceServerException, aiohttp.ClientError, OSError):
            return None

    def prepare(self, model: str, tensors: tuple[RequestTensor, ...], outputs: tuple[str, ...],
                options: RequestOptions = RequestOptions()) -> None:
        """The KServe v2 body (binary tensor extension unless json_body) and its headers, built once."""
        binary = not self.json_body
        inputs = []
        for tensor in tensors:
            infer_input = httpclient.InferInput(tensor.name, list(tensor.array.shape), tensor.datatype)
            try:
                infer_input.set_data_from_numpy(tensor.array, binary_data=binary)
            except InferenceServerException as exc:  # BF16 has no JSON form: tritonclient refuses it
                raise LoadSpecError(f"input {tensor.name} ({tensor.datatype}) cannot be sent as a JSON body: "
                                    f"{exc.message()}") from None
            inputs.append(infer_input)
        requested = [httpclient.InferRequestedOutput(name, binary_data=binary) for name in outputs]
        body, json_size = httpclient.InferenceServerClient.generate_request_body(
            inputs, requested, priority=options.priority, timeout=options.timeout_us or None)
        headers = {"Content-Type": "application/json" if json_size is None else "application/octet-stream"}
        if json_size is not None:
            headers["Inference-Header-Content-Length"] = str(json_size)
        payload = body if isinstance(body, bytes) else body.encode()
        self._request = build_request(self.url, f"/v2/models/{quote(model)}/infer", payload,
                                      {**headers, **self.headers})

    async def infer(self) -> None:
        """One POST on a pooled keep-alive connection."""
        try:
            status, error = await self._pool.exchange(self._request)
        except HttpRequestFailed as exc:
            raise InferenceFailed(str(exc)) from None
        if status != 200:
            raise InferenceFailed(http_error_text(status, error))

    async def closed_loop(self, succeeded: Callable[[float], None], failed: Callable[[str], None],
                          running: Callable[[], bool]) -> None:
        """Requests driven from the connection's reply callback (see http_path.closed_loop)."""
        await closed_loop(self._pool.host, self._pool.port, self._request, succeeded, failed, running)

    async def close(self) -> None:
        """Close the connections and the control client."""
        self._pool.close()
        await self._control.close()


def _raw_bytes(tensor: RequestTensor) -> bytes:
    """The tensor as the raw_input_contents bytes Triton expects."""
    if tensor.datatype == "BYTES":
        serialized = serialize_byte_tensor(tensor.array)
        return bytes(serialized.item()) if serialized.size else b""
    return np.ascontiguousarray(tensor.array).tobytes()


def open_transport(protocol: str, url: str, http_json_body: bool = False,
                   headers: Mapping[str, str] | None = None) -> Transport:
    """A transport for 'grpc' or 'http' at host:port (a scheme prefix is stripped)."""
    address = host_port(url)
    if protocol == "grpc":
        return GrpcTransport(address, headers)
    if protocol == "http":
        return HttpTransport(address, json_body=http_json_body, headers=headers)
    raise InputError(f"unknown protocol {protocol!r} (expected one of {', '.join(PROTOCOLS)})")

