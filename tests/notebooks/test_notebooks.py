"""Every notebook runs top to bottom on a fresh kernel against a real tritonserver; its facts are checked."""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import psutil
import pytest

from tests.notebooks.harness import NOTEBOOKS, ROOT, ExecutedNotebook, executed, stdout_of, stop_cell

FAKES = ROOT / "tests" / "fakes"
pytestmark = pytest.mark.server  # every test runs a notebook on a Jupyter kernel


def no_tritonserver_under(state_dir: Path) -> bool:
    """Whether no tritonserver process runs with files in this notebook's state dir."""
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "tritonserver" in cmdline and str(state_dir) in cmdline:
            return False
    return True


def no_scratch_left(workdir: Path) -> bool:
    """Whether a notebook left no folder of its own in the kernel's temporary dir (harness.kernel_env)."""
    return not list((workdir / "tmp").glob("ge-nb*"))


def svg_images(markup: str) -> list[tuple[str, str]]:
    """The inline SVG images of an HTML output: (alt, SVG text), in order."""
    found = re.findall(r'src="data:image/svg\+xml;base64,([^"]+)" alt="([^"]*)"', markup)
    return [(html.unescape(alt), base64.b64decode(data).decode("utf-8")) for data, alt in found]


def bar_heights(svg: str) -> list[float]:
    """The heights of a bar chart's bars."""
    return [float(h) for h in re.findall(r'<rect class="bar" [^>]*height="([\d.]+)"', svg)]


def widget_values(run: ExecutedNotebook, model_name: str, key: str = "value") -> list[Any]:
    """One trait of every stored widget of a kind."""
    return [state.get(key) for state in run.widgets(model_name)]


def test_01_builds_validates_and_catches_a_broken_config(tmp_path: Path) -> None:
    with executed("01_build_a_model_repository.ipynb", tmp_path) as run:
        facts = run.facts()
    llama, bert = facts["spec"]["llama_model"], facts["spec"]["bert_model"]
    assert llama["inputs"] == {"input_ids": ["INT64", [-1]]}
    assert llama["outputs"] == {"logits": ["FP32", [-1, 32000]]} and llama["max_batch_size"] == 8
    assert sorted(bert["inputs"]) == ["attention_mask", "input_ids"]  # read from the ONNX graph
    assert facts["spec_errors"] == [
        "typo.yaml:6:21 models[0].max_batch_size: must be >= 0",
        "typo.yaml:7:5 models[0].instance_grup: unknown key 'instance_grup'; did you mean 'instance_group'?",
    ]
    build = facts["build"]
    assert set(build["first"].values()) == {"added"} and set(build["second"].values()) == {"unchanged"}
    assert {"llama_model/config.pbtxt", "llama_model/1/model.onnx", "bert_model/1/model.onnx"} <= set(
        build["files"])
    onnx = facts["onnx"]
    assert onnx["llama_logits_shape"] == [2, 12, 32000] and onnx["bert_output_shapes"] == {"pooled": [3, 64]}
    assert all(size < 20 for size in onnx["sizes_mb"].values())
    atc = facts["atc"]
    assert not atc["atc_found"] and not atc["om_written"] and atc["problems"] == []
    assert "--framework=5" in atc["command"] and "--dynamic_batch_size=1,2,4,8" in atc["command"]
    assert [p.split(":")[0] for p in atc["wrong_problems"]] == ["E10035", "E10018"]
    assert facts["validate"] == {"ok": True, "models": ["bert_model", "llama_model"], "errors": 0,
                                 "warnings": facts["validate"]["warnings"]}
    broken = facts["broken"]
    assert broken["ok"] is False
    fields = {p["field"]: p for p in broken["errors"]}
    assert "dynamic batching preferred size must be <= max batch size" in fields[
        "dynamic_batching.preferred_batch_size[1]"]["message"]
    assert "dimension must be integer >= 1, or -1" in fields["input[0].dims[0]"]["message"]
    assert 'parameters["execution_mode"].value.string_value' in fields
    assert all(p["file"].endswith("llama_model/config.pbtxt") and p["line"] and p["column"]
               for p in broken["errors"])
    (syntax,) = broken["syntax"]
    assert (syntax["line"], syntax["column"]) == (3, 17) and "eight" in syntax["message"]


def test_01_runs_atc_where_it_exists(tmp_path: Path) -> None:
    calls = tmp_path / "atc-calls.jsonl"
    env = {"PATH": f"{FAKES}{os.pathsep}{os.environ['PATH']}", "FAKE_ATC_LOG": str(calls)}
    with executed("01_build_a_model_repository.ipynb", tmp_path, env=env) as run:
        atc = run.facts()["atc"]
    assert atc["atc_found"] and atc["om_written"]
    (call,) = [json.loads(line) for line in calls.read_text(encoding="utf-8").splitlines()]
    assert "--soc_version=Ascend910B3" in call and "--input_shape=input_ids:-1,128" in call


def test_02_launches_watches_load_and_stops(tmp_path: Path) -> None:
    with executed("02_launch_and_watch.ipynb", tmp_path, then=[stop_cell()]) as run:
        facts = run.facts()
        assert no_tritonserver_under(run.state_dir)
    assert facts["launch"]["state"] == "ready"
    assert facts["launch"]["models"] == {"bert_model": "READY", "llama_model": "READY"}
    assert facts["launch"]["http_url"].startswith("http://127.0.0.1:")
    cli = facts["cli"]
    assert cli["state"] == "ready" and cli["http_url"] == facts["launch"]["http_url"] and cli["pid"] > 0
    assert cli["models"] == facts["launch"]["models"]
    board = facts["dashboard"]
    assert board["buttons"] == {"bert_model:1": ["reload", "unload"], "llama_model:1": ["reload", "unload"]}
    assert board["models"]["llama_model:1"]["MODE"] == "cpu-emulated" and set(board["devices"]) == {"0", "1"}
    infer = facts["infer"]
    assert infer["shapes"] == {"llama_model": {"logits": [1, 16, 32000]}, "bert_model": {"pooled": [1, 64]}}
    assert infer["llama_success_total"] >= 10 and infer["execution_mode"] == "cpu-emulated"
    load = facts["load"]
    assert load["errors"] == 0 and load["peak_queue_depth"] >= 1 and load["queue_after"] == 0
    assert load["client_p50_ms"]["8"] > load["client_p50_ms"]["1"]  # latency answers to load
    assert load["charted_model"] == "llama_model" and load["charted_p50_points"] >= 2
    assert facts["cleanup"] == {"state": "stopped", "ports_freed": True, "poller_running": False}
    assert no_scratch_left(tmp_path)
    assert "stop()" in stdout_of(run.nb.cells[15])  # the last cell says how to stop: Run All left it live
    shown = [o for o in run.nb.cells[7].outputs
             if "dashboard closed at" in o.get("data", {}).get("text/html", "")]
    assert len(shown) == 1 and "widget-view" not in str(shown)  # closed: plain HTML a saved notebook keeps
    charts = svg_images(shown[0]["data"]["text/html"])  # and its charts as images
    assert [alt for alt, _ in charts] == [
        "NPU0 utilization history", "NPU1 utilization history", "latency of llama_model",
        "throughput of llama_model", "queue depth of llama_model"]
    assert all("<polyline" in svg for _, svg in charts)
    headers = [v for v in widget_values(run, "HTMLModel") if "session nb02-launch-and-watch" in (v or "")]
    assert any("● ready" in h and "Triton 2." in h for h in headers)
    named = ("description", "tooltip")  # a row's buttons are icons named by their tooltips
    buttons = {v for key in named for v in widget_values(run, "ButtonModel", key)}
    assert {"reload", "load", "unload", "run load test"} <= buttons
    assert 8 in widget_values(run, "IntSliderModel")


def test_03_reloads_tunes_and_survives_a_broken_reload(tmp_path: Path) -> None:
    with executed("03_reload_and_tune.ipynb", tmp_path, then=[stop_cell()]) as run:
        facts = run.facts()
        assert no_tritonserver_under(run.state_dir)
    reload = facts["reload"]
    assert reload["load_test_model"] == reload["charted_model"] == "llama_model"  # load what is charted
    assert reload["ok"] and "reload llama_model: new instance of version 1 READY" in reload["status_label"]
    assert reload["buttons_after"] == ["reload", "unload"]
    cycle = facts["unload_load"]
    assert cycle["unload"] == "unload bert_model: unloaded" and cycle["state_after_unload"] == "UNAVAILABLE"
    assert cycle["buttons_after_unload"] == ["load"]
    # the unload frees bert_model's share: its NPU uses that much less, and it is on no NPU any more
    assert cycle["bert_share"] > 0 and cycle["bert_on_npus_after_unload"] == []
    assert cycle["npu_used_before"] - cycle["npu_used_after_unload"] == cycle["bert_share"]
    assert cycle["load"] == "load bert_model: version 1 READY"
    assert cycle["buttons_after_load"] == ["reload", "unload"]
    tune = facts["tune"]
    assert tune["changed"] == ["llama_model"] and tune["reloaded"] == [True]
    assert tune["before"] == {"max_batch_size": 8, "preferred_batch_size": [4, 8],
                              "max_queue_delay_microseconds": 500, "instances": 1}
    assert tune["after"] == {"max_batch_size": 16, "preferred_batch_size": [8, 16],
                             "max_queue_delay_microseconds": 2000, "instances": 2}
    compare = facts["compare"]
    for side in ("before", "after"):
        assert compare[side]["requests"] > 0 and compare[side]["errors"] == 0
    assert compare["plotted_throughput"] == [compare["before"]["throughput_rps"],
                                             compare["after"]["throughput_rps"]]
    assert compare["plotted_latency"][0] == [compare["before"]["p50_ms"], compare["after"]["p50_ms"]]
    (bars,) = [o for o in run.nb.cells[12].outputs if "text/html" in o.get("data", {})]
    assert "widget-view" not in str(bars)  # images, not a widget: a saved notebook shows them
    shown = dict(svg_images(bars["data"]["text/html"]))
    assert len(bar_heights(shown["throughput (req/s), 8 clients"])) == 2
    assert len(bar_heights(shown["client latency (ms)"])) == 4 and all(
        h > 0 for svg in shown.values() for h in bar_heights(svg))
    broken = facts["broken"]
    assert not broken["ok"] and "preferred size must be <= max batch size" in broken["message"]
    assert "Triton kept version 1 serving" in broken["message"] and "firebrick" in broken["status_label"]
    assert broken["index"]["llama_model:1"] == "READY" and broken["still_answers_shape"] == [1, 16, 32000]
    assert broken["config_in_effect"] == tune["after"]  # the tuned version kept serving
    cost = facts["triton_cost"]  # the seed's table for the tuned llama: its shape, never its timings
    assert {k: cost[k] for k in ("model", "executor", "instances", "rounds", "input_shapes", "batches")} == {
        "model": "llama_model", "executor": "cpu-emulated", "instances": 2, "rounds": 2,
        "input_shapes": {"input_ids": [1, 16]}, "batches": ["1", "4"]}
    assert cost["latency_headers"] == ["batch", "direct (cpu-emulated)", "through Triton, gRPC",
                                       "Triton adds, gRPC (range)", "through Triton, HTTP",
                                       "Triton adds, HTTP (range)"]
    assert cost["throughput_headers"] == ["direct", "through Triton, gRPC", "gRPC ÷ direct",
                                          "through Triton, HTTP", "HTTP ÷ direct"]
    assert cost["throughput_rows"] == 1 and cost["notes"] == 1  # CPU emulation: the shared-CPU note
    (tables,) = [o["data"]["text/html"] for o in run.nb.cells[19].outputs if "text/html" in o.get("data", {})]
    assert tables.count("<table") == 2 and "Triton adds, HTTP (range)" in tables  # HTML, kept when saved
    # Triton stops at once (exit 0), not at the end of its exit timeout
    assert facts["cleanup"] == {"state": "stopped", "ports_freed": True, "exit_code": 0}
    assert no_scratch_left(tmp_path)
    assert "stop()" in stdout_of(run.nb.cells[21])  # the last cell says how to stop: Run All left it live
    closed = [o for o in run.nb.cells[2].outputs
              if "dashboard closed at" in o.get("data", {}).get("text/html", "")]
    assert len(closed) == 1 and len(svg_images(closed[0]["data"]["text/html"])) == 5
    statuses = [v or "" for v in widget_values(run, "HTMLModel")]
    assert any("✗ reload llama_model failed" in s for s in statuses)


def test_04_serves_an_npu_ge_repository_in_cpu_emulation(tmp_path: Path) -> None:
    with executed("04_npu_ge_on_ascend.ipynb", tmp_path, then=[stop_cell()]) as run:
        facts = run.facts()
        assert no_tritonserver_under(run.state_dir)
    assert facts["host"] == {"native_npu_ge": False, "npu_smi": None, "acl_importable": False,
                             "runs_as": "cpu-emulated"}
    validate = facts["validate"]
    assert validate["ok"] and validate["models"] == ["bert_static", "llama_npu_ge"]
    assert any("exclude each other" in e for e in validate["conflict_errors"])
    launch = facts["launch"]
    assert launch["state"] == "ready" and launch["npu_ge"] == "glue" and launch["instances"] == 2
    assert launch["completed_inputs"] == {"input_ids": ["TYPE_INT64", [-1]]}  # filled from the ONNX
    assert launch["completed_outputs"] == {"logits": ["TYPE_FP32", [-1, 32000]]}
    assert launch["parameters"] == {"device_ids": "0,1", "static_model": "0", "profiling": "dynamic",
                                    "ge.aicoreNum": "12|10"}
    infer = facts["infer"]
    assert infer["llama_npu_ge"]["shape"] == [2, 8, 32000] and infer["bert_static"]["shape"] == [4, 64]
    assert all(v["max_abs_diff"] <= 1e-5 for v in infer.values())
    watch = facts["watch"]
    assert set(watch["devices"]) == {"0", "1"} and watch["llama_devices"] == ["0", "1"]
    assert all(d["kind"] == "cpu-emulated" and d["memory_used_bytes"] > 0 for d in watch["devices"].values())
    # the glue names each device by its logical id; no npu-smi here, so no card or chip
    assert [(d["logical_id"], d["npu_id"], d["chip_id"]) for d in watch["devices"].values()] == [
        (0, None, None), (1, None, None)]
    assert all(d["id_source"].startswith("ge-glue") for d in watch["devices"].values())
    assert watch["execution_mode"] == "cpu-emulated"
    # npu_ge picks one of the model's NPUs per execution: which was busy is unknown, shown as such
    assert watch["utilization_while_llama_ran"] == {"0": None, "1": None}
    assert watch["load_test"]["requests"] > 0 and watch["load_test"]["errors"] == 0
    assert watch["table"]["BACKEND"] == "npu_ge" and watch["table"]["STATE"] == "READY"
    assert facts["cleanup"] == {"state": "stopped", "ports_freed": True}
    assert no_scratch_left(tmp_path)
    assert "stop()" in stdout_of(run.nb.cells[15])  # Run All left the dashboard live; the last cell says how
    closed = [o for o in run.nb.cells[12].outputs
              if "dashboard closed at" in o.get("data", {}).get("text/html", "")]
    assert len(closed) == 1 and len(svg_images(closed[0]["data"]["text/html"])) == 5
    assert any(v and v > 0 for v in widget_values(run, "FloatProgressModel"))


def test_05_streams_an_llm_and_shows_its_token_figures(tmp_path: Path) -> None:
    with executed("05_llm_generation.ipynb", tmp_path, then=[stop_cell()]) as run:
        facts = run.facts()
        assert no_tritonserver_under(run.state_dir)
    spec = facts["spec"]
    assert spec["decoupled"] and spec["outputs"] == ["token_id", "text_output"]
    assert spec["inputs"]["input_ids"] == spec["inputs"]["text_input"] == "optional"
    assert spec["parameters"]["generate_tokenizer"] == "tokenizer.json"
    assert facts["launch"] == {"state": "ready", "models": {"llama_generate": "READY"}}
    assert facts["stream"] == {"tokens": 24, "equal_to_direct_loop": True, "text_equals_decoded": True}
    bench = facts["bench"]
    assert bench["exit"] == 0 and bench["rows"] == [
        {"concurrency": c, "requests": 8, "errors": 0, "output_tokens": 128} for c in (1, 4)]
    assert all(rate > 0 for rate in bench["tokens_per_s"])
    metrics = facts["metrics"]
    table = metrics["table"]
    assert float(table["TTFT p50 ms"]) > 0 and float(table["ITL p99 ms"]) >= float(table["ITL p50 ms"]) > 0
    assert table["RUNNING"] == "0" and table["WAITING"] == "0" and table["KV"].endswith("(0%)")
    assert metrics["peak_output_tokens_per_s"] > 0 and metrics["ttft_p99_points"] > 0
    assert metrics["thresholds"] == {"ttft_p99_ms": 500.0, "itl_p99_ms": 100.0, "kv_cache_share": 0.9}
    load = metrics["load_test"]
    assert load["requests"] > 0 and load["errors"] == 0 and load["output_tokens"] == 32 * load["requests"]
    assert load["ttft_p50_ms"] > 0 and load["itl_p50_ms"] > 0
    # every generation sent has ended by its length, counted: the stream, bench's 2 x 8 and its warm-ups (one
    # per stream: 1 + 4), the load test's and its 4 warm-ups (none cancelled: each stream ends its last one)
    ended = metrics["ended"]
    assert ended["length"] + ended["stop"] == 1 + (16 + 1 + 4) + (load["requests"] + 4)
    assert ended["cancel"] == ended["error"] == 0
    assert facts["cleanup"] == {"state": "stopped", "ports_freed": True}
    assert no_scratch_left(tmp_path)
    assert "stop()" in stdout_of(run.nb.cells[-2])  # Run All left the dashboard live; the last cell says how
    closed = [o for cell in run.nb.cells for o in cell.get("outputs", [])
              if "dashboard closed at" in o.get("data", {}).get("text/html", "")]
    assert len(closed) == 1 and "TTFT p99 ms" in closed[0]["data"]["text/html"]  # the Generation table


def staged(name: str) -> str:
    """A notebook as git would commit it (its staged version, through the clean filter when one is
    configured); the file itself outside a git checkout. JupyterLab's autosave may have put outputs in the
    working copy: that is the user's, not what the repository holds."""
    if shutil.which("git") and (ROOT / ".git").exists():
        shown = subprocess.run(["git", "-C", str(ROOT), "show", f":notebooks/{name}"], capture_output=True,
                               text=True, encoding="utf-8", check=True)
        return shown.stdout
    return (NOTEBOOKS / name).read_text(encoding="utf-8")


def test_the_notebooks_are_kept_with_outputs_stripped() -> None:
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert names == ["01_build_a_model_repository.ipynb", "02_launch_and_watch.ipynb",
                     "03_reload_and_tune.ipynb", "04_npu_ge_on_ascend.ipynb", "05_llm_generation.ipynb"]
    for name in names:
        nb = nbformat.reads(staged(name), as_version=4)
        nbformat.validate(nb)
        code = [cell for cell in nb.cells if cell.cell_type == "code"]
        assert all(cell.outputs == [] and cell.execution_count is None for cell in code), name
        assert "widgets" not in nb.metadata and nb.metadata.kernelspec.name == "python3", name


def with_outputs(text: str) -> str:
    """A notebook as JupyterLab autosaves it after a run: outputs, counts, widget state, timings."""
    nb = json.loads(text)
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    for count, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        cell["execution_count"] = count + 1
        cell["outputs"] = [{"name": "stdout", "output_type": "stream", "text": ["● ready ─ 12 ms\n"]}]
        cell["metadata"]["execution"] = {"iopub.status.idle": "2026-12-01T18:00:00.000000Z"}
    return json.dumps(nb, indent=1)


def test_the_strip_filter_gives_back_exactly_the_committed_notebook() -> None:
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        committed = path.read_bytes()
        run = with_outputs(committed.decode("utf-8")).encode("utf-8")
        strip = subprocess.run([sys.executable, str(NOTEBOOKS / "strip_outputs.py")], input=run,
                               capture_output=True, check=True, env={**os.environ, "LC_ALL": "C"})
        assert strip.stdout == committed, path.name  # no diff from an autosave


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_with_the_documented_filter_git_stages_an_autosaved_notebook_without_outputs(tmp_path: Path) -> None:
    repo = tmp_path / "clone"
    (repo / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / ".gitattributes", repo / ".gitattributes")
    shutil.copy(NOTEBOOKS / "strip_outputs.py", repo / "notebooks" / "strip_outputs.py")
    committed = (NOTEBOOKS / "02_launch_and_watch.ipynb").read_text(encoding="utf-8")
    (repo / "notebooks" / "02.ipynb").write_text(with_outputs(committed), encoding="utf-8")
    git = ["git", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    # what notebooks/README.md tells a contributor to run once
    clean = f"{sys.executable} notebooks/strip_outputs.py"
    subprocess.run([*git, "config", "filter.strip-notebook-outputs.clean", clean], check=True)
    subprocess.run([*git, "config", "filter.strip-notebook-outputs.smudge", "cat"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    shown = subprocess.run([*git, "show", ":notebooks/02.ipynb"], capture_output=True, check=True)
    assert shown.stdout.decode("utf-8") == committed
    assert '"output_type"' in (repo / "notebooks" / "02.ipynb").read_text(encoding="utf-8")  # the user's
    status = subprocess.run([*git, "status", "--porcelain", "notebooks/02.ipynb"], capture_output=True,
                            text=True, check=True)
    assert status.stdout == "A  notebooks/02.ipynb\n"  # outputs in the working copy are no change
