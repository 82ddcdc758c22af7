"""The serving engines a session can be: Triton (launched or attached), or an attached vLLM / vllm-ascend
or MindIE Server, which ge-console only watches (their APIs load no model at run time)."""

from __future__ import annotations

from triton_ge_console.triton_terms import parse_endpoint

TRITON = "triton"
VLLM = "vllm"
MINDIE = "mindie"
ATTACHABLE = (VLLM, MINDIE)  # `attach URL --engine ...` beside the default, Triton
LABELS = {TRITON: "Triton", VLLM: "vLLM", MINDIE: "MindIE"}

# MindIE Server's defaults (MindIE-LLM src/include/config/config_info.h, ServerConfig): metrics on the
# management address at port 1027, over HTTPS (httpsEnabled true); its /metrics answers only with
# MIES_SERVICE_MONITOR_MODE=1 (src/server/endpoint/http_wrapper/prometheus_metrics.cpp)
MINDIE_METRICS_URL = "https://127.0.0.2:1027/metrics"
MINDIE_MONITOR_SWITCH = "MIES_SERVICE_MONITOR_MODE=1"


def control_refusal(engine: str) -> str | None:
    """Why load, unload and reload are off for a session of this engine (None: Triton, they work)."""
    if engine == VLLM:
        return ("vLLM serves the model it was started with: its API cannot load, unload or reload one "
                "(restart vLLM with the new model where it runs)")
    if engine == MINDIE:
        return ("MindIE Server serves the models of its config.json: its API cannot load, unload or reload "
                "one (change config.json and restart MindIE Server where it runs)")
    return None


def default_metrics_url(engine: str, http_url: str) -> str | None:
    """Where an engine's Prometheus text answers when --metrics-url is not given: vLLM on its API port,
    MindIE on its management address's metrics port."""
    if engine == VLLM:
        return f"{http_url.rstrip('/')}/metrics"
    if engine == MINDIE:
        return MINDIE_METRICS_URL
    return None


def token_header(engine: str, header: str, token: str) -> tuple[str, str]:
    """The (header, value) a session's calls carry its token in, decided here for every engine: vLLM's
    --api-key and MindIE's key as `Authorization: Bearer KEY` (vLLM refuses the bare key), Triton's in the
    session's own header as is."""
    if engine in ATTACHABLE:
        return "Authorization", f"Bearer {token}"
    return header, token


def label(engine: str) -> str:
    """The engine's name as operators write it."""
    return LABELS.get(engine, engine)


def is_https(url: str | None) -> bool:
    """Whether a URL is HTTPS (a --ca file applies to it)."""
    return bool(url) and parse_endpoint(url or "", strict=False).scheme == "https"


def on_this_host(url: str) -> bool:
    """Whether a URL names this machine by a loopback address (its NPUs are then npu-smi's here)."""
    host = parse_endpoint(url, strict=False).host
    return host == "localhost" or host.startswith("127.") or host == "::1"
