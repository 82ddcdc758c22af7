"""What reading a large output off the device costs the glue: one copy into the array served, against the
former staged read (a pinned staging buffer, then a second copy out of it with ptr_to_bytes).

    python3 benchmarks/output_copy.py [--mib 256] [--rounds 5] [--json PATH]

There is no NPU here: the OM is the fake AscendCL's (tests/fakes/acl), whose device memory is host memory
and whose aclrtMemcpy is a memmove, so what is measured is the host side of the read (the copies the glue
makes and the memory they touch), not PCIe. One output of --mib MiB (FP32) is read from the same device
buffer by both arms in alternating rounds: "direct", the glue's own `AclExecutor._copy_out` (memcpy into
a fresh numpy array); "staged", the read it replaced (memcpy into a malloc_host buffer, ptr_to_bytes,
frombuffer). Prints a markdown table; writes benchmarks/results/output_copy.json (or --json PATH).
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from result_file import arguments, write_result

ROOT = Path(__file__).resolve().parents[1]
ACL_MEMCPY_DEVICE_TO_HOST = 2


def expand_model(rows: int, cols: int) -> bytes:
    """x FP32 [1, 1] → y = x expanded to [rows, cols]: a large output without weights to load."""
    shape = numpy_helper.from_array(np.array([rows, cols], np.int64), "shape")
    graph = helper.make_graph([helper.make_node("Expand", ["x", "shape"], ["y"])], "expand",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, cols])], [shape])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def fake_om(folder: Path, mib: int) -> Path:
    """A fake OM (tests/fakes/acl) of the expand model, one output of `mib` MiB."""
    cols = 1024
    rows = mib * (1 << 20) // (4 * cols)
    onnx_bytes = expand_model(rows, cols)
    onnx.checker.check_model(onnx.load_from_string(onnx_bytes))
    (folder / "model.source.onnx").write_bytes(onnx_bytes)
    om = folder / "model.om"
    om.write_text(json.dumps({"fake_om": 1, "onnx": "model.source.onnx", "static_batch": 1,
                              "input_shape": {"x": [1, 1]}}), encoding="utf-8")
    return om


def staged_read(acl: Any, device_ptr: int, nbytes: int, staging: int) -> np.ndarray:
    """The former read: device → pinned staging buffer, then a copy out of it (ptr_to_bytes)."""
    ret = acl.rt.memcpy(staging, nbytes, device_ptr, nbytes, ACL_MEMCPY_DEVICE_TO_HOST)
    assert ret == 0, ret
    return np.frombuffer(acl.util.ptr_to_bytes(staging, nbytes), dtype=np.float32)


def timed(read: Callable[[], np.ndarray]) -> float:
    """Seconds one read takes."""
    started = time.perf_counter()
    read()
    return time.perf_counter() - started


def measure(mib: int, rounds: int) -> dict[str, Any]:
    """Both arms, alternating, on one output of `mib` MiB."""
    sys.path.insert(0, str(ROOT / "tests" / "fakes"))
    acl = importlib.import_module("acl")
    from triton_ge_console.backend_glue.acl_executor import AclExecutor

    with tempfile.TemporaryDirectory() as folder:
        executor = AclExecutor(fake_om(Path(folder), mib), device_id=0)
        try:
            outputs, _ = executor.run({"x": np.full((1, 1), 3.0, np.float32)})
            slot = executor._out_slots[0]
            nbytes = int(outputs["y"].nbytes)
            staging, ret = acl.rt.malloc_host(nbytes)
            assert ret == 0, ret
            arms = {"direct": lambda: executor._copy_out(slot, slot.info.dims),
                    "staged": lambda: staged_read(acl, slot.device_ptr, nbytes, staging)}
            assert all(np.array_equal(read().reshape(-1), outputs["y"].reshape(-1)) for read in arms.values())
            times: dict[str, list[float]] = {name: [] for name in arms}
            for number in range(rounds):
                for name in (("direct", "staged") if number % 2 == 0 else ("staged", "direct")):
                    times[name].append(timed(arms[name]))
            acl.rt.free_host(staging)
        finally:
            executor.close()
    ratios = [s / d for s, d in zip(times["staged"], times["direct"], strict=True)]
    return {"mib": mib, "rounds": rounds, "seconds": times, "ratio_staged_over_direct": ratios,
            "host_copies": {"direct": 1, "staged": 2}, "staging_bytes": {"direct": 0, "staged": nbytes}}


def table(figures: dict[str, Any]) -> str:
    """The markdown table of one run."""
    def ms(values: list[float]) -> str:
        low, high = min(values) * 1e3, max(values) * 1e3
        return f"{statistics.median(values) * 1e3:,.1f} ms ({low:,.1f}–{high:,.1f})"

    ratios = figures["ratio_staged_over_direct"]
    return "\n".join([
        f"| read of one {figures['mib']} MiB output | host copies | pinned staging | time per read, median "
        "(range) |",
        "|---|---|---|---|",
        f"| direct (the glue now) | 1 | none | {ms(figures['seconds']['direct'])} |",
        f"| staged (before) | 2 | {figures['mib']} MiB per output | {ms(figures['seconds']['staged'])} |",
        "",
        f"staged ÷ direct: {statistics.median(ratios):.2f}x (rounds {min(ratios):.2f}–{max(ratios):.2f}x)",
    ])


def main() -> int:
    parser = arguments(__doc__, "output_copy", rounds=5)
    parser.add_argument("--mib", type=int, default=256)
    args = parser.parse_args()
    figures = measure(args.mib, args.rounds)
    print(table(figures))
    write_result(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
