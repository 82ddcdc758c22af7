"""Whether Triton may batch a model, found by running it on the CPU where its graph cannot tell
(batch_axis): one random sample alone, beside two others and at another place in a batch of two."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from triton_ge_console.model_files import external_data

PROBE_LIMIT_BYTES = 256 << 20  # the ONNX and its external data: a larger model is not run at build/validate
PROBE_DIM = 32  # a symbolic non-batch dim's size in the probe (a multiple of a CNN's usual strides)


@dataclass(frozen=True)
class Probe:
    """What running the model said: problems (each names an output), or why it was not run."""

    problems: tuple[str, ...] = ()
    skipped: str | None = None


def probe(source: Path | bytes, limit: int = PROBE_LIMIT_BYTES) -> Probe:
    """Run the model on the CPU: a random sample a alone, joined with b ([a, b]) and with c ([a, c], [c, a]).
    Its answer must sit in dim 0 of every output, the same beside either partner at either place, and the
    answer alone up to batch-size numerics (kernels for one row and for two differ in rounding). Skipped
    (said why) above `limit` bytes of model and external data, or when it does not run on random inputs."""
    if isinstance(source, Path) and external_data.check_external_data(source):
        return Probe(skipped="its external data has problems (said where the files are checked); it is not "
                             "loaded")
    size = len(source) if isinstance(source, bytes) else _model_bytes(source)
    if size > limit:
        return Probe(skipped=f"the model is {size / 2**20:.1f} MiB, over the {limit / 2**20:.1f} MiB this "
                             "check runs at build/validate")
    import onnxruntime as ort

    try:
        options = ort.SessionOptions()
        options.log_severity_level = 4
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(source if isinstance(source, bytes) else str(source), options,
                                       providers=["CPUExecutionProvider"])
        a, b, c = (_random_feeds(session.get_inputs(), seed) for seed in (1, 2, 3))
        alone = session.run(None, a)
        joined = [session.run(None, {k: np.concatenate([x[k], y[k]]) for k in a})
                  for x, y in ((a, b), (a, c), (c, a))]
    except Exception as exc:
        said = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        return Probe(skipped=f"the model did not run on random inputs ({type(exc).__name__}: {said})")
    names = [o.name for o in session.get_outputs()]
    problems = tuple(f"output '{name}': {why}"
                     for name, solo, ab, ac, ca in zip(names, alone, *joined, strict=True)
                     if (why := _differs(solo, ab, ac, ca)))
    return Probe(problems)


def _model_bytes(path: Path) -> int:
    """The ONNX file and its external data."""
    try:
        return path.stat().st_size + external_data.external_bytes(path)
    except OSError:
        return 0


def _random_feeds(inputs: Sequence[Any], seed: int) -> dict[str, np.ndarray]:
    """One sample (batch 1) for every input: symbolic dims PROBE_DIM, small integers (valid ids, masks)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in inputs:
        shape = [1] + [d if isinstance(d, int) and d > 0 else PROBE_DIM for d in value.shape[1:]]
        kind = value.type
        if "string" in kind:
            feeds[value.name] = rng.integers(0, 9, shape).astype(str).astype(object)
        elif "bool" in kind:
            feeds[value.name] = rng.integers(0, 2, shape).astype(bool)
        elif "int" in kind:
            dtype = np.dtype(kind.removeprefix("tensor(").removesuffix(")"))
            feeds[value.name] = rng.integers(0, 2, shape).astype(dtype)
        else:
            floats = {"tensor(float16)": np.float16, "tensor(double)": np.float64}.get(kind, np.float32)
            feeds[value.name] = rng.standard_normal(shape).astype(floats)
    return feeds


def _differs(alone: np.ndarray, ab: np.ndarray, ac: np.ndarray, ca: np.ndarray) -> str | None:
    """Why sample a's answers alone, in [a, b], [a, c] and [c, a] are not one answer along dim 0, or None:
    another partner at the same place (samples mixed), another place, or the number joined."""
    if ab.ndim == 0 or ab.shape[0] != 2 or alone.shape[:1] != (1,) or ab.shape[1:] != alone.shape[1:]:
        return (f"two requests joined answer shape {list(ab.shape)}, one alone {list(alone.shape)}: dim 0 is "
                "not the batch")
    differs = "a request joined with another answers differently than alone"
    if not _close(ab[0:1], ac[0:1], rtol=1e-5, atol=1e-6):
        return differs + ": its answer changes with the request beside it (samples are mixed)"
    if not _close(ab[0:1], ca[1:2], rtol=1e-5, atol=1e-6):
        return differs + ": its answer changes with its place among the requests joined"
    if not _close(ab[0:1], alone, rtol=1e-2, atol=1e-2):
        return differs + ": its answer changes with the number of requests joined"
    return None


def _close(got: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> bool:
    """Equal integers, strings and booleans; floats within tolerance (NaN equal to NaN)."""
    if got.dtype.kind in "fc":
        return bool(np.allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True))
    return bool(np.array_equal(got, expected))
