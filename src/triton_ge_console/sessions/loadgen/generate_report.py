"""What `bench --generate` writes besides its table: the --json document (`context`, `warnings`, `rows`,
as plain `bench --json`), its warnings (percentiles resting on too few generations, an open-loop rate
the server did not keep up with) and the per-request export (JSON Lines)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from triton_ge_console.sessions.loadgen.generate_bench import MS_PER_S, GenerateLoad, GenerateRow
from triton_ge_console.sessions.loadgen.generate_client import StreamResult
from triton_ge_console.sessions.loadgen.generate_stats import samples_needed, thin_percentiles

KEPT_UP = 0.85  # a rate step whose completions per second fall below this share of its arrivals warns


def level(row: GenerateRow) -> str:
    """A step as the table and the warnings name it: its rate (with the most in flight) or concurrency."""
    if row.rate is not None:
        return f"{row.rate:g}/s (≤{row.concurrency} in flight)"
    return f"conc {row.concurrency}"


def generate_warnings(rows: Sequence[GenerateRow]) -> list[str]:
    """What an operator must know before trusting a step's figures."""
    found = []
    for row in rows:
        thin = thin_percentiles(row.requests)
        if row.requests and thin:
            needs = ", ".join(f"p{p} needs {samples_needed(p)}" for p in thin)
            found.append(f"{level(row)}: {row.requests} generations: {needs}; those percentiles rest on "
                         "fewer samples (read them as the largest values seen; raise --requests)")
        offered = row.offered_per_s
        if row.rate is not None and offered and (row.requests_per_s or 0.0) < KEPT_UP * offered:
            done = row.requests_per_s or 0.0
            found.append(f"{level(row)}: {done:.3g} requests/s completed of {offered:.3g}/s arriving "
                         f"({done / offered:.0%}): the server did not keep up, so the figures are at its "
                         "saturation, not at this rate")
    return found


def generate_context(load: GenerateLoad, started_at: str, server: Mapping[str, Any],
                     client: Mapping[str, Any]) -> dict[str, Any]:
    """What the run measured against: the endpoint, the model, the server's version and the sha256 of the
    model config it reported, the arguments, the client machine."""
    arguments = {key: value for key, value in asdict(load).items() if key != "headers"}
    where = f"{load.host}:{load.port}{load.base_path}"
    return {"kind": "generate", "endpoint": load.endpoint, "protocol": load.protocol, "url": where,
            "model": load.model, "started_at": started_at, **server, "arguments": arguments,
            "client": dict(client)}


def generate_json(context: Mapping[str, Any], warnings: Sequence[str], rows: Sequence[GenerateRow],
                  compared: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """--json: the run's context, its warnings, its rows, and the ratios to a baseline when one was given."""
    data: dict[str, Any] = {"context": dict(context), "warnings": list(warnings),
                            "rows": [asdict(row) for row in rows]}
    if compared is not None:
        data["compared"] = compared
    return data


class RequestExport:
    """--export FILE: one JSON line per measured generation, written as each step ends."""

    def __init__(self, path: Path) -> None:
        self._file: IO[str] = path.open("w", encoding="utf-8")
        self._wall, self._clock = time.time(), time.perf_counter()  # perf_counter times → epoch seconds

    def step(self, row: GenerateRow, results: list[StreamResult]) -> None:
        """A step's generations, in the order they were sent."""
        for result in sorted(results, key=lambda r: r.sent):
            self._file.write(json.dumps(self.record(row, result)) + "\n")
        self._file.flush()

    def record(self, row: GenerateRow, result: StreamResult) -> dict[str, Any]:
        """One generation: when it was sent, TTFT, every inter-token interval, e2e, lengths, status."""
        def ms(seconds: float | None) -> float | None:
            """Seconds as the report's milliseconds, None (not measured) kept."""
            return None if seconds is None else seconds * MS_PER_S

        return {"step": level(row), "concurrency": row.concurrency, "rate": row.rate,
                "send_time": self._wall + (result.sent - self._clock), "ttft_ms": ms(result.ttft),
                "itls_ms": [gap * MS_PER_S for gap in result.itls], "e2e_ms": ms(result.e2e),
                "input_tokens": result.prompt_tokens, "output_tokens": result.output_tokens,
                "status": "ok" if result.error is None else "error", "error": result.error}

    def close(self) -> None:
        """Close the file."""
        self._file.close()


def server_facts(load: GenerateLoad) -> dict[str, Any]:
    """Triton's version and the sha256 of the model's config as it reports them (None where it would not
    say, and behind an OpenAI API, which says neither)."""
    facts: dict[str, Any] = {"server_version": None, "config_digest": None}
    if load.endpoint != "triton":
        return facts
    from tritonclient.utils import InferenceServerException

    from triton_ge_console.sessions.loadgen.inputs import config_digest

    headers = dict(load.headers)
    try:
        if load.protocol == "grpc":
            import tritonclient.grpc as grpcclient

            with grpcclient.InferenceServerClient(f"{load.host}:{load.port}") as client:
                metadata = client.get_server_metadata(headers=headers, as_json=True)
                facts["server_version"] = metadata.get("version")
                config = client.get_model_config(load.model, headers=headers, as_json=True).get("config", {})
        else:
            import tritonclient.http as httpclient

            with httpclient.InferenceServerClient(f"{load.host}:{load.port}") as client:
                facts["server_version"] = client.get_server_metadata(headers=headers).get("version")
                config = client.get_model_config(load.model, headers=headers)
        facts["config_digest"] = config_digest(config)
    except (InferenceServerException, OSError):
        pass
    return facts
