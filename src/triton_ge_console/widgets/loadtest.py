"""A load-test control: pick a model, concurrency and duration, run the load generator, see the figures."""

from __future__ import annotations

import dataclasses
import html
import threading
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as w

LoadRunner = Callable[[str, int, float], Any]  # (model, concurrency, duration_s) -> result with figures
WINDOWS = 3


def loadgen_runner(url: str, protocol: str = "grpc", shapes: Mapping[str, tuple[int, ...]] | None = None,
                   headers: Mapping[str, str] | None = None) -> LoadRunner:
    """A LoadRunner over the session load generator: one closed-loop step measured in three windows."""
    from triton_ge_console.sessions.loadgen.run import LoadSpec, run_load_sync

    def run(model: str, concurrency: int, duration_s: float) -> Any:
        window_ms = max(int(duration_s * 1000 / WINDOWS), 100)
        spec = LoadSpec(model=model, url=url, protocol=protocol, concurrency=(concurrency,),
                        shapes=dict(shapes or {}), headers=dict(headers or {}), window_ms=window_ms,
                        warmup_ms=min(window_ms, 1000), max_windows=WINDOWS, stable_windows=WINDOWS)
        rows = run_load_sync(spec)
        if not rows:
            raise RuntimeError(f"load test on {model} ended without a measured step")
        return rows[-1]

    return run


def generate_runner(url: str, protocol: str = "grpc", headers: Mapping[str, str] | None = None,
                    prompt_tokens: int = 16, output_tokens: int = 32) -> LoadRunner:
    """A LoadRunner for generate models over `bench --generate`'s engine: `concurrency` streams, each
    generation after the other, until the duration is up; its token figures as flat fields."""
    from triton_ge_console.sessions.loadgen.generate_bench import run_timed, timed_load

    def run(model: str, concurrency: int, duration_s: float) -> dict[str, Any]:
        load = timed_load(model, url, concurrency, protocol, headers, prompt_tokens, output_tokens)
        row = run_timed(load, duration_s, threading.Event())
        if row.requests == 0:
            raise RuntimeError(f"load test on {model} ended without a generation: {row.first_error}")
        return generate_fields(dataclasses.asdict(row))

    return run


def generate_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    """A `bench --generate` row flat: its percentile dicts as ttft_p50_ms, itl_p99_ms, ..."""
    fields: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, Mapping):
            figure = key.removesuffix("_ms")
            fields.update({f"{figure}_{q}_ms": v for q, v in value.items()})
        else:
            fields[key] = value
    return fields


def result_fields(result: Any) -> dict[str, Any]:
    """A load result as plain fields, whatever shape the load generator returns."""
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return dataclasses.asdict(result)
    if isinstance(result, Mapping):
        return dict(result)
    return {k: v for k, v in vars(result).items() if not k.startswith("_")}


def fields_table(fields: Mapping[str, Any]) -> str:
    """Scalar fields as a two-column HTML table."""
    rows = "".join(f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(_fmt(v))}</td></tr>"
                   for k, v in fields.items() if isinstance(v, (int, float, str, bool)) or v is None)
    return f"<table>{rows}</table>"


def _fmt(value: Any) -> str:
    """Floats to 3 significant-ish decimals."""
    return f"{value:.3f}" if isinstance(value, float) else str(value)


class LoadTestControl:
    """Runs one load test at a time in a worker thread; the run button is disabled meanwhile."""

    def __init__(self, runner: LoadRunner | None, models: list[str] | None = None, background: bool = True,
                 concurrency: int = 4, duration_s: float = 5.0,
                 generate_runner: LoadRunner | None = None) -> None:
        self.runner = runner
        self.generate_runner = generate_runner  # for generate models: token streams (bench --generate)
        self.generate_models: set[str] = set()
        self.background = background
        self.model = w.Dropdown(options=models or [], description="model")
        self.concurrency = w.IntSlider(value=concurrency, min=1, max=64, description="concurrency")
        self.duration = w.FloatSlider(value=duration_s, min=1.0, max=120.0, step=1.0, description="seconds")
        self.run_button = w.Button(description="run load test", button_style="primary",
                                   disabled=runner is None)
        self.status = w.HTML("" if runner else "<i>no load generator available</i>")
        self.output = w.HTML("")
        self.results: list[dict[str, Any]] = []
        self._thread: threading.Thread | None = None
        self.run_button.on_click(lambda _button: self.start())
        wrap = w.Layout(flex_flow="row wrap", align_items="center")  # a narrow output: the next line
        self.box = w.VBox([w.HTML("<b>Load test</b>"),
                           w.HBox([self.model, self.concurrency, self.duration], layout=wrap),
                           w.HBox([self.run_button, self.status], layout=wrap), self.output])

    def set_models(self, names: list[str], generate: set[str] | None = None) -> None:
        """Offer the session's models, keeping the current choice when it still exists; `generate` names
        those that stream tokens (load-tested with the generate runner)."""
        self.generate_models = set(generate or ())
        if list(self.model.options) != names:
            keep = self.model.value if self.model.value in names else (names[0] if names else None)
            self.model.options = names
            self.model.value = keep

    def start(self) -> bool:
        """Start a load test with the chosen settings; False when one is running or nothing is chosen."""
        if self.runner is None or self.model.value is None or self.run_button.disabled:
            return False
        self.run_button.disabled = True
        args = (str(self.model.value), int(self.concurrency.value), float(self.duration.value))
        self.status.value = html.escape(f"… {args[1]} clients on {args[0]} for {args[2]:.0f}s")
        if self.background:
            self._thread = threading.Thread(target=self._run, args=args, name="ge-loadtest", daemon=True)
            self._thread.start()
        else:
            self._run(*args)
        return True

    def _run(self, model: str, concurrency: int, duration_s: float) -> None:
        """Run the load generator and show its figures, or its error."""
        runner = self.runner
        if model in self.generate_models and self.generate_runner is not None:
            runner = self.generate_runner
        assert runner is not None
        try:
            fields = result_fields(runner(model, concurrency, duration_s))
        except Exception as exc:
            failure = html.escape(f"✗ load test failed: {type(exc).__name__}: {exc}")
            self.status.value = f"<span style='color:firebrick'>{failure}</span>"
        else:
            self.results.append(fields)
            self.status.value = html.escape(f"✓ {concurrency} clients on {model} for {duration_s:.0f}s")
            self.output.value = fields_table(fields)
        finally:
            self.run_button.disabled = False

    def wait(self, timeout: float = 300.0) -> None:
        """Wait for a running load test."""
        if self._thread is not None:
            self._thread.join(timeout)
