"""`ge-console bench MODEL --vs-direct`: the seed's table for served glue models (structure, never speed)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.backend_glue.conftest import FAKES, server_env
from tests.conftest import ROOT, RunningServer, run_triton
from tests.models import DENSE_CONFIG, dense_model, param, write_fake_om, write_model
from tests.sessions.loadgen.test_bench_cli import bench
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.repository.demo_models import demo_bytes
from triton_ge_console.sessions.loadgen.pinning import stub_pids

pytestmark = pytest.mark.timeout(240)

MODELS = ("llama_model", "bert_model", "npu_dense", "om_dense")
LLAMA = """
    backend: "ge"
    max_batch_size: 8
    input [{ name: "input_ids" data_type: TYPE_INT64 dims: [-1] }]
    output [{ name: "logits" data_type: TYPE_FP32 dims: [-1, 32000] }]
    instance_group [{ count: 1 kind: KIND_CPU }]
""" + param("intra_op_threads", "1")
# I/O completed from the ONNX; batched dynamically with the seed's delay for bert
BERT = ('backend: "ge"\nmax_batch_size: 8\ninstance_group [{ count: 1 }]\n'
        "dynamic_batching { max_queue_delay_microseconds: 200 }\n")
NPU_GE = 'backend: "npu_ge"\nmax_batch_size: 4\n' + param("DEVICEIDS", "0")
QUICK = ["--rounds", "1", "--requests", "3", "--window-ms", "150", "--quiet"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory,
           triton_dist: TritonDistribution) -> Iterator[RunningServer]:
    """The demo llama and bert under `ge`, and an `npu_ge` model whose I/O comes from its ONNX."""
    root = tmp_path_factory.mktemp("vs-direct")
    install_backend_dir(root / "backends", triton_dist)
    repo = root / "repo"
    write_model(repo, "llama_model", LLAMA, demo_bytes("demo:llama"))
    write_model(repo, "bert_model", BERT, demo_bytes("demo:bert"))
    write_model(repo, "npu_dense", NPU_GE, dense_model(seed=3), onnx_name="net.onnx")
    om_folder = write_model(repo, "om_dense", DENSE_CONFIG.format(
        backend="ge", extra=param("om_model_path", "dense.om")), None)
    write_fake_om(om_folder / "1", dense_model(seed=9), gears=(1, 2, 4, 8), name="dense.om")
    # the stubs import the fake `acl` (tests/fakes), so the OM runs through the glue's AscendCL executor
    source = os.pathsep.join([str(FAKES), str(ROOT / "src")])  # this checkout's package in the stubs
    with (server_env(PYTHONPATH=source, GE_GLUE_RUN_DIR=str(root / "run")),
          run_triton(triton_dist, repo, root / "backends", models=MODELS) as running):
        running.repo = repo  # type: ignore[attr-defined]
        yield running


@pytest.fixture
def session(server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A registry session for the server (both protocols, its repository and pid)."""
    from triton_ge_console.sessions.server import registry

    monkeypatch.setenv("GE_CONSOLE_STATE_DIR", str(tmp_path))
    registry.Registry().save(registry.SessionRecord(
        name="lab", pid=server.process.pid, started_at=time.time(), http_url=server.http_url,
        grpc_url=server.grpc_hostport, metrics_url=server.metrics_url,
        repository=server.repo,  # type: ignore[attr-defined]
        spec=None, backend_dir=None, log_path=None, token_ref=None, attached=True, session_dir=None,
        state="ready"))
    return "lab"


def _consistent(spread: dict[str, float]) -> None:
    """A figure over rounds: its median lies in its range."""
    assert spread["low"] <= spread["median"] <= spread["high"]


def _check_report(document: dict[str, Any], protocols: list[str], batches: list[int]) -> None:
    """Rows for every batch × protocol; p99 ≥ p50; with one round, Triton adds = through Triton − direct
    and the ratio = through Triton ÷ direct."""
    assert [(r["batch"], r["protocol"]) for r in document["latency"]] == [
        (b, p) for b in batches for p in protocols]
    for row in document["latency"]:
        for key in ("direct_p50_ms", "direct_p99_ms", "triton_p50_ms", "triton_p99_ms", "added_p50_ms"):
            _consistent(row[key])
        assert 0 < row["direct_p50_ms"]["median"] <= row["direct_p99_ms"]["median"]
        assert 0 < row["triton_p50_ms"]["median"] <= row["triton_p99_ms"]["median"]
        if document["rounds"] == 1:
            added = row["triton_p50_ms"]["median"] - row["direct_p50_ms"]["median"]
            assert row["added_p50_ms"]["median"] == pytest.approx(added)
    assert [r["protocol"] for r in document["throughput"]] == protocols
    for row in document["throughput"]:
        direct, triton = row["direct_rps"]["median"], row["triton_rps"]["median"]
        assert row["batch"] == batches[0] and direct > 0 and triton > 0
        if document["rounds"] == 1:
            assert row["ratio"]["median"] == pytest.approx(triton / direct)


def test_llama_over_both_protocols_of_a_session_as_json(session: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A session gives both protocols and the repository: the seed's figures for each, sequence length 4."""
    code, out, err = bench(capsys, "llama_model", "--session", session, "--vs-direct", "--batch", "1,4",
                           "--seq-len", "4", "--json", *QUICK)
    assert code == 0, err
    document = json.loads(out)
    _check_report(document, ["grpc", "http"], [1, 4])
    assert document["executor"] == "cpu-emulated" and document["instances"] == 1
    assert document["input_shapes"] == {"input_ids": [1, 4]}
    assert document["concurrency"] == 2  # two per served instance, by default
    assert "share this host's" in document["notes"][0] and document["pinned"] == []
    assert document["context"]["client"]["cores"] == os.cpu_count()
    assert document["queue_delay_us"] is None  # served without dynamic batching


def test_bert_table_has_the_seeds_shape(session: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The table: a line per batch with p50 (p99) each way and what Triton adds, then the throughputs."""
    code, out, err = bench(capsys, "bert_model", "--session", session, "--vs-direct", "--rounds", "2",
                           "--requests", "3", "--window-ms", "150", "--quiet")
    assert code == 0, err
    assert "bert_model: latency ms, p50 (p99), median of 2 round(s)" in out
    # the seed's delay is in every latency through Triton at concurrency 1: the table says which it is
    assert "dynamic batching delay 200 µs" in " ".join(out.split())
    for header in ("direct (cpu-emulated)", "through Triton, gRPC", "Triton adds, HTTP (range)",
                   "maximum throughput", "gRPC ÷ direct", "HTTP ÷ direct"):
        assert header in out
    batch_lines = [line for line in out.splitlines() if line.strip("│ ").split(" ")[0] in ("1", "4", "8")]
    assert len(batch_lines) == 3
    assert "note: CPU emulation: the client, tritonserver and the model share" in out


def test_npu_ge_model_by_url_and_repository(server: RunningServer,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """--url measures the one protocol it names; the repository is given; an npu_ge model's own executor."""
    repository = str(server.repo)  # type: ignore[attr-defined]
    code, out, err = bench(capsys, "npu_dense", "--url", server.http_hostport, "--protocol", "http",
                           "--repository", repository, "--vs-direct", "--batch", "2", "--json", *QUICK)
    assert code == 0, err
    document = json.loads(out)
    _check_report(document, ["http"], [2])
    assert document["input_shapes"] == {"x": [2, 4]}


def test_an_om_runs_through_ascendcl_both_ways(server: RunningServer, fake_acl: ModuleType,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """An OM: the direct side is the glue's AscendCL executor (the fake acl here, as the stub's), and an
    NPU host gets no shared-CPU note."""
    del fake_acl
    repository = str(server.repo)  # type: ignore[attr-defined]
    code, out, err = bench(capsys, "om_dense", "--url", server.grpc_hostport, "--repository", repository,
                           "--vs-direct", "--batch", "1,2", "--json", *QUICK)
    assert code == 0, err
    document = json.loads(out)
    _check_report(document, ["grpc"], [1, 2])
    assert document["executor"] == "npu" and document["notes"] == []


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning needs two CPUs")
def test_pinned_executor_and_stub_then_put_back(server: RunningServer, session: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """--pin-executor runs the executor and the served model's stub on their CPU, the client and the server
    on the rest, and puts every affinity back afterwards."""
    cpus = sorted(os.sched_getaffinity(0))
    (stub,) = stub_pids("llama_model", server.process.pid)
    pids = (stub, server.process.pid or 0, os.getpid())
    before = {pid: os.sched_getaffinity(pid) for pid in pids}
    code, out, err = bench(capsys, "llama_model", "--session", session, "--vs-direct", "--batch", "1",
                           "--pin-executor", str(cpus[-1]), "--json", *QUICK)
    assert code == 0, err
    document = json.loads(out)
    assert document["pinned"] == [cpus[-1]]
    assert document["notes"] == [f"the executor ran on CPU {cpus[-1]} (in-process, and the served model's 1 "
                                 f"stub process); the client and tritonserver on CPU "
                                 f"{','.join(map(str, cpus[:-1]))}"]
    assert {pid: os.sched_getaffinity(pid) for pid in before} == before


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning needs two CPUs")
def test_while_pinned_each_side_runs_on_its_own_cpus(server: RunningServer) -> None:
    """During the rounds: the executor's threads and the served stub on the pinned CPU; this thread (the
    client) and tritonserver on the others."""
    from triton_ge_console.sessions.loadgen.vs_direct import VsDirectSpec, measure_vs_direct_sync

    cpus = set(os.sched_getaffinity(0))
    pinned = max(cpus)
    (stub,) = stub_pids("llama_model", server.process.pid)
    seen: list[dict[str, set[int]]] = []

    def look(_text: str) -> None:
        executors = [t for t in threading.enumerate() if t.name.startswith("direct")]
        seen.append({"executor": set().union(*(os.sched_getaffinity(t.native_id or 0) for t in executors)),
                     "client": os.sched_getaffinity(0), "stub": os.sched_getaffinity(stub),
                     "server": os.sched_getaffinity(server.process.pid or 0)})

    spec = VsDirectSpec("llama_model", {"http": server.http_hostport}, server.repo,  # type: ignore[attr-defined]
                        batches=(1,), rounds=1, requests=3, throughput_s=0.1, pin=(pinned,),
                        server_pid=server.process.pid)
    measure_vs_direct_sync(spec, look)
    during = seen[-1]  # the round's line, heard while every affinity is set
    assert during == {"executor": {pinned}, "client": cpus - {pinned}, "stub": {pinned},
                      "server": cpus - {pinned}}
    assert os.sched_getaffinity(0) == cpus and os.sched_getaffinity(stub) == cpus


@pytest.mark.parametrize(("args", "code", "message"), [
    (["llama_model", "--url", "127.0.0.1:1"], 2, "needs the served repository: give --repository DIR"),
    (["llama_model", "--session", "lab", "--rate", "5"], 2, "--rate and --generate do not apply"),
    (["llama_model", "--session", "lab", "--pin-executor", "0-4096"], 2, "this host offers CPUs"),
    (["llama_model", "--session", "lab", "--batch", "16"], 2, "above the model's max_batch_size 8"),
])
def test_bad_options_exit_2_with_one_line(session: str, capsys: pytest.CaptureFixture[str], args: list[str],
                                          code: int, message: str) -> None:
    """Each refusal names the option."""
    result, _, err = bench(capsys, *args, "--vs-direct", *QUICK)
    assert result == code and message in err and err.count("\n") == 1, err


def test_a_model_not_served_by_the_glue_is_refused(bench_server: RunningServer, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Only ge and npu_ge models have an executor to run directly: a Python model says so (exit 2)."""
    code, _, err = bench(capsys, "delay", "--url", bench_server.grpc_hostport, "--repository", str(tmp_path),
                         "--vs-direct", *QUICK)
    assert code == 2 and "served by backend 'python'" in err, err


def test_an_unreachable_server_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No server at the address: one line naming it, exit 1."""
    code, _, err = bench(capsys, "llama_model", "--url", "127.0.0.1:1", "--repository", str(tmp_path),
                         "--vs-direct", *QUICK)
    assert code == 1 and "cannot talk to Triton at 127.0.0.1:1" in err, err


async def test_the_library_call_works_inside_a_running_loop(server: RunningServer) -> None:
    """A notebook cell has a running event loop; measure_vs_direct_sync still returns the report, and the
    progress callback hears each round."""
    from triton_ge_console.sessions.loadgen.vs_direct import VsDirectSpec, measure_vs_direct_sync

    heard: list[str] = []
    spec = VsDirectSpec("bert_model", {"http": server.http_hostport}, server.repo,  # type: ignore[attr-defined]
                        batches=(1,), seq_len=3, rounds=2, requests=3, throughput_s=0.1)
    report = measure_vs_direct_sync(spec, heard.append)
    assert [row.batch for row in report.latency] == [1] and report.rounds == 2
    assert report.input_shapes == {"input_ids": (1, 3), "attention_mask": (1, 3)}
    assert [line.split(":")[0] for line in heard if line.startswith("round")] == ["round 1/2", "round 2/2"]
