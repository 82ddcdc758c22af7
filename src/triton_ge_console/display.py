"""How snapshot figures read as text, shared by the Textual console and the notebook widgets (UI-free).

One place decides what a missing figure looks like (`—`, also for NaN) and how an uptime reads.
"""

from __future__ import annotations

import math
from typing import Any

MISSING = "—"
GIB = 1024**3
MIB = 1024**2


def number(value: float | int | None, digits: int = 1) -> str:
    """A figure with fixed decimals, or the missing mark (None or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def percent(ratio: float | None) -> str:
    """A 0..1 ratio as a whole percentage."""
    return MISSING if ratio is None else f"{ratio * 100:.0f}%"


def gib(value: int | None) -> str:
    """Bytes as GiB with one decimal (no unit: the column or the total says it)."""
    return MISSING if value is None else f"{value / GIB:.1f}"


def size(value: int | None) -> str:
    """Bytes in the unit that shows them: GiB, MiB under a GiB, KiB under a MiB (3 significant digits)."""
    if value is None:
        return MISSING
    if value >= 1000 * MIB:
        return f"{value / GIB:.1f} GiB"
    if value >= MIB:
        return f"{value / MIB:.1f} MiB" if value < 100 * MIB else f"{value / MIB:.0f} MiB"
    return f"{value / 1024:.0f} KiB"


def memory(used: int | None, total: int | None) -> str:
    """Used/total device memory; a few MiB held on a 64 GiB device read as MiB, not as 0.0 GiB."""
    if used is None and total is None:
        return MISSING
    if used is not None and total is not None and used >= GIB and total >= GIB:
        return f"{number(used / GIB)}/{number(total / GIB)} GiB"
    return f"{size(used)}/{size(total)}"


def age(seconds: float | None) -> str:
    """Seconds as an age the way kubectl prints one (42s, 12m, 2h05m, 3d4h): it changes once a minute."""
    if seconds is None:
        return MISSING
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h"


def restarted_words(restarts: int | None) -> str:
    """Beside a server's health: that its supervisor restarted it after crashes ("" when it never did)."""
    return f"restarted {restarts}× after a crash" if restarts else ""


def duration(seconds: float | None) -> str:
    """Seconds as HH:MM:SS (days prefixed when over a day)."""
    if seconds is None:
        return MISSING
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}d {clock}" if days else clock


def threshold_level(value: float | int | None, limit: float | None) -> str:
    """Where a figure stands against a spec threshold: "over" at or over it, "near" from 75% of it, else ""
    (the console and the notebooks colour by it)."""
    if value is None or limit is None:
        return ""
    if value >= limit:
        return "over"
    return "near" if value >= 0.75 * limit else ""


GenerationPart = tuple[str, str | None, float | None]  # text, the spec threshold it answers to, its value


def kv_text(held: str, share: float | None) -> str:
    """KV use: the bytes held with their share, or the share alone where a server gives only that (vLLM,
    MindIE report a 0..1 usage and no bytes)."""
    if held == MISSING and share is not None:
        return percent(share)
    return f"{held} ({percent(share)})"


def window_label(window_s: float | None) -> str:
    """What a generate model's percentiles cover: the last seconds, or all since the model loaded."""
    return "since load" if window_s is None else f"last {window_s:.0f} s"


def token_latency_cells(ttft_p50_ms: float | None, itl_p50_ms: float | None) -> tuple[str, str]:
    """A generate model's two latency cells in the models tables: its TTFT and ITL p50, tagged T and I
    (Triton's request duration of a decoupled model ends when its execute returns, before the first token)."""
    return f"T {number(ttft_p50_ms, 2)}", f"I {number(itl_p50_ms, 2)}"


def token_latency_legend(window_s: float | None) -> str:
    """What a generate model's tagged latency cells (token_latency_cells) read, and over what span."""
    return f"T/I: generate models' TTFT/ITL p50 ms ({window_label(window_s)})"


def generation_parts(figures: dict[str, Any]) -> list[GenerationPart]:
    """A generate model's token figures (a `generation_row`) as text pieces, those a spec threshold can
    colour (ttft_p99_ms, itl_p99_ms, kv_cache_share) marked with it: status, console, notebooks."""
    get = figures.get
    ended = ", ".join(f"{reason} {count}" for reason, count in get("ended_by_reason") or ()) or MISSING
    kv = memory(get("kv_cache_bytes"), get("kv_cache_capacity_bytes"))
    rejected = get("rejected_total")  # the glue's count (engines keep none): the client's, not failures
    refused = "" if rejected is None else f"  refused {number(rejected)}"
    return [
        (f"TTFT p50 {number(get('ttft_p50_ms'), 2)} p99 ", None, None),
        (number(get("ttft_p99_ms"), 2), "ttft_p99_ms", get("ttft_p99_ms")),
        (f" ms  ITL p50 {number(get('itl_p50_ms'), 2)} p99 ", None, None),
        (number(get("itl_p99_ms"), 2), "itl_p99_ms", get("itl_p99_ms")),
        (f" ms  e2e p50 {number(get('e2e_p50_ms'), 1)} p99 {number(get('e2e_p99_ms'), 1)} ms "
         f"({window_label(get('window_s'))})", None, None),
        (f"  running {number(get('running'))} waiting {number(get('waiting'))}  KV ", None, None),
        (kv_text(kv, get("kv_cache_share")), "kv_cache_share", get("kv_cache_share")),
        (f"  tokens {number(get('prompt_tokens_total'))} in {number(get('generated_tokens_total'))} out"
         f" ({number(get('output_tokens_per_s'), 1)}/s)  ended: {ended}{refused}", None, None),
    ]


def engine_requests_line(row: dict[str, Any]) -> str:
    """A vLLM or MindIE model's requests (a `status` row): succeeded, failed, per second, e2e latency."""
    get = row.get
    return (f"requests {number(get('success_total'))} ok {number(get('failure_total'))} failed "
            f"({number(get('request_rate'), 1)}/s)  e2e p50 {number(get('latency_p50_ms'), 1)} "
            f"p99 {number(get('latency_p99_ms'), 1)} ms")


def engine_memory_line(memory: dict[str, Any]) -> str:
    """One vllm-ascend worker's NPU memory (a `status` engine_memory entry, GiB) on one line."""
    get = memory.get
    return (f"NPU memory (vllm-ascend, dp {memory['dp']}): weights {number(get('weights_gib'), 2)} GiB, "
            f"KV cache {number(get('kv_cache_gib'), 2)} GiB, reserved {number(get('reserved_gib'), 2)} "
            f"of {number(get('total_gib'), 2)} GiB (utilization {percent(get('utilization'))})")


def engine_memory_short(memory: dict[str, Any]) -> str:
    """One vllm-ascend worker's NPU memory (an engine_memory entry, GiB) in a few words, for a header."""
    get = memory.get
    return (f"NPU dp{memory['dp']}: weights {number(get('weights_gib'), 2)} + KV "
            f"{number(get('kv_cache_gib'), 2)} of {number(get('total_gib'), 2)} GiB")


def generation_line(figures: dict[str, Any]) -> str:
    """The token figures on one line of plain text."""
    return "".join(text for text, _, _ in generation_parts(figures))


def printable(text: str) -> str:
    """Text with every control or format character escaped (as Python writes it: \\x1b, \\u202e), so a
    name from user input printed in a message can never clear, recolour or reorder the operator's
    terminal; printable text, any script, is left as it is (and escaping twice changes nothing)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


LISTED_PROBLEMS = 20  # a message lists this many problems and counts the rest


def listed(problems: list[str], limit: int = LISTED_PROBLEMS) -> list[str]:
    """The first `limit` problems, then one line counting the rest: thousands never flood a terminal."""
    if len(problems) <= limit:
        return problems
    return [*problems[:limit], f"... and {len(problems) - limit} more problems"]


def printable_lines(text: str) -> str:
    """printable() for each line of a message that has several (the console's notifications)."""
    return "\n".join(printable(line) for line in text.split("\n"))


def metrics_where(url: str | None, name: str, attached: bool, discovered_by: str | None = None) -> str:
    """Where a session's metrics answer: a launched session without a URL was started with metrics turned
    off, and so was a discovered pod (attach k8s: read its arguments), while the metrics of one attached by
    hand are only unknown (none was given), so it says how to give them."""
    if url:
        return url
    if attached and not discovered_by:
        return f"not given (ge-console down {name}, then attach again with --metrics-url URL)"
    return "off"
