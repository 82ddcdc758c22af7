"""What each Python-backend call a generate model makes per token costs the host, in CPU.

    python3 benchmarks/stub_calls.py [--calls 2000] [--rounds 5] [--json PATH]

A decoupled Python model inside a real tritonserver makes `--calls` of one kind of call per request, on
the request's own response sender: `is_cancelled()` (the glue asks it per running stream per step),
`observe()` on a histogram (per token, the time-to-first-token and inter-token histograms), `increment()`
on a counter, and `send()` of a one-token response (per token; the client reads every one). Each is an IPC
round trip between the stub and tritonserver. psutil reads the CPU time tritonserver, the stub and this
process (the gRPC client) spent across the request; kinds alternate in rounds. Figures are microseconds
of CPU (and of wall) per call, median of rounds with the range. Prints a markdown table; writes
benchmarks/results/stub_calls.json.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from generate_overhead import build, note, start
from result_file import arguments, write_result
from triton_ge_console.sessions.loadgen.rounds import Spread, round_order
from triton_ge_console.sessions.server.shm import remove_shm_regions

PROBE = "stub_calls"
KINDS = ("is_cancelled", "histogram observe", "counter increment", "send")
COLUMNS = ("tritonserver_cpu_us", "stub_cpu_us", "client_cpu_us", "wall_us")
CONFIG = f"""name: "{PROBE}"
backend: "{PROBE}"
max_batch_size: 0
model_transaction_policy {{ decoupled: true }}
input [{{ name: "kind" data_type: TYPE_INT32 dims: [1] }},
       {{ name: "calls" data_type: TYPE_INT32 dims: [1] }}]
output [{{ name: "token_id" data_type: TYPE_INT64 dims: [1] }}]
"""
# Makes `calls` calls of one kind on the request's sender (or the model's metrics), then the final response.
MODEL = textwrap.dedent("""\
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            family = pb_utils.MetricFamily
            self.families = [family(name="stub_calls_seconds", description="probe", kind=family.HISTOGRAM),
                             family(name="stub_calls_total", description="probe", kind=family.COUNTER)]
            self.histogram = self.families[0].Metric(labels={"probe": "1"}, buckets=[0.001, 0.01, 0.1])
            self.counter = self.families[1].Metric(labels={"probe": "1"})

        def execute(self, requests):
            for request in requests:
                kind = int(pb_utils.get_input_tensor_by_name(request, "kind").as_numpy()[0])
                calls = int(pb_utils.get_input_tensor_by_name(request, "calls").as_numpy()[0])
                sender = request.get_response_sender()
                token = pb_utils.Tensor("token_id", np.array([1], np.int64))
                for _ in range(calls):
                    if kind == 0:
                        sender.is_cancelled()
                    elif kind == 1:
                        self.histogram.observe(0.005)
                    elif kind == 2:
                        self.counter.increment(1.0)
                    else:
                        sender.send(pb_utils.InferenceResponse([token]), flags=0)
                sender.send(pb_utils.InferenceResponse([token]),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return None
""")


def cpu(process: psutil.Process) -> float:
    """A process's CPU seconds so far."""
    times = process.cpu_times()
    return times.user + times.system


def one_request(channel: Any, server: psutil.Process, kind: int, calls: int) -> dict[str, float]:
    """One request's calls: microseconds per call of wall and of each side's CPU."""
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name=PROBE)
    for name, value in (("kind", kind), ("calls", calls)):
        request.inputs.add(name=name, datatype="INT32", shape=[1])
        request.raw_input_contents.append(np.array([value], np.int32).tobytes())
    stubs = server.children(recursive=True)
    client = psutil.Process()
    before = (cpu(server), sum(cpu(s) for s in stubs), cpu(client), time.perf_counter())
    for response in channel(request, timeout=300):
        if response.error_message:
            raise RuntimeError(response.error_message)
    after = (cpu(server), sum(cpu(s) for s in stubs), cpu(client), time.perf_counter())
    per_call = [(b - a) * 1e6 / calls for a, b in zip(before, after, strict=True)]
    return dict(zip(COLUMNS, per_call, strict=True))


def main() -> int:
    """Stand the probe up beside the generate benchmark's models, measure, print, write the JSON."""
    import grpc
    from tritonclient.grpc import service_pb2

    parser = arguments(__doc__, "stub_calls", rounds=5)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ge-stub-calls-"))
    repo, backends = build(root, 16, 1)
    (repo / PROBE / "1").mkdir(parents=True)
    (repo / PROBE / "config.pbtxt").write_text(CONFIG)
    (backends / PROBE).mkdir()
    (backends / PROBE / "model.py").write_text(MODEL)
    note(f"starting tritonserver (logs in {root})")
    process, ports = start(root, repo, backends, name="server", models=(PROBE,))
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{ports.grpc}")
        stream = channel.unary_stream("/inference.GRPCInferenceService/ModelStreamInfer",
                                      request_serializer=service_pb2.ModelInferRequest.SerializeToString,
                                      response_deserializer=service_pb2.ModelStreamInferResponse.FromString)
        server = psutil.Process(process.pid)
        for number in range(len(KINDS)):  # warm-up
            one_request(stream, server, number, 100)
        rounds: list[dict[str, dict[str, float]]] = []
        for index in range(args.rounds):
            note(f"round {index + 1} of {args.rounds}")
            rounds.append({name: one_request(stream, server, KINDS.index(name), args.calls)
                           for name in round_order(KINDS, index)})
        channel.close()
    finally:
        process.stop()
        remove_shm_regions(root / "server")
    shutil.rmtree(root, ignore_errors=True)
    figures = {kind: {c: Spread.of(r[kind][c] for r in rounds) for c in COLUMNS} for kind in KINDS}
    print(f"\n### One Python-backend call, {args.calls} per request, µs: median of {args.rounds} rounds "
          "(range)\n")
    print("| call | tritonserver CPU | stub CPU | client CPU | wall |\n|---|---|---|---|---|")
    for kind in KINDS:
        print(f"| {kind} | " + " | ".join(figures[kind][c].text("{:.0f}") for c in COLUMNS) + " |")
    write_result(args.json, {"calls": args.calls, "rounds": rounds})
    return 0


if __name__ == "__main__":
    sys.exit(main())
