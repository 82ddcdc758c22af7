"""One model over two NPUs as one instance (tensor_parallel) beside a model on one NPU, on a real server:
the glue charges each NPU its share, and the snapshot and the console's device lines say who is where."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from tests.waiting import wait_until
from triton_ge_console.backend_glue.ledger import human_bytes
from triton_ge_console.cli import main
from triton_ge_console.console.widgets.detail import npu_text
from triton_ge_console.console.widgets.devices import device_rows, models_by_device
from triton_ge_console.sessions.live import LiveSource
from triton_ge_console.sessions.server.registry import Registry

pytestmark = [pytest.mark.timeout(300), pytest.mark.server]  # starts a tritonserver

SPEC = """\
name: tp
server:
  metrics: {interval_ms: 500}
models:
  - name: bert_model
    backend: ge
    source: demo:bert
    max_batch_size: 4
    instance_group: {count: 1, device_ids: [0, 1], tensor_parallel: 2}
  - name: llama_model
    backend: ge
    source: demo:llama
    max_batch_size: 4
    instance_group: {device_ids: [1]}
"""


def _loaded_memory(log: str, model: str) -> tuple[str, int]:
    """The NPUs and bytes the glue logged when it loaded the model."""
    found = re.search(rf"ge glue: model {model} instance \S+ .*? device=([\d,]+) memory=(\d+) bytes", log)
    assert found is not None, f"no load line for {model}"
    return found.group(1), int(found.group(2))


def test_each_npu_holds_its_share_and_shows_its_models(tmp_path: Path) -> None:
    spec = tmp_path / "deploy.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    assert main(["up", str(spec), "--name", "tp", "--timeout", "180"]) == 0
    record = Registry().load("tp")
    assert record.log_path is not None
    log = record.log_path.read_text(encoding="utf-8", errors="replace")
    bert_devices, bert_bytes = _loaded_memory(log, "bert_model")
    llama_devices, llama_bytes = _loaded_memory(log, "llama_model")
    assert (bert_devices, llama_devices) == ("0,1", "1")
    source = LiveSource.from_record(record, npu_smi=None)
    try:
        def used() -> dict[str, int | None]:
            return {d.id: d.memory_used_bytes for d in source.poll().devices}

        share = math.ceil(bert_bytes / 2)
        wait_until(lambda: used() == {"0": share, "1": share + llama_bytes}, timeout=60)
        snapshot = source.poll()
    finally:
        source.close()
    bert = snapshot.model("bert_model")
    assert bert is not None and bert.devices == ("0", "1")
    assert bert.memory_by_device == (("0", share), ("1", share))
    half, whole = human_bytes(share), human_bytes(llama_bytes)
    assert models_by_device(snapshot) == {"0": [f"bert_model {half}"],
                                          "1": [f"bert_model {half}", f"llama_model {whole}"]}
    header, *rows = device_rows(snapshot, {}, width=160)
    assert "HEALTH" in header[0][0]
    assert [row[-1][0] for row in rows] == [f"  bert_model {half}",
                                            f"  bert_model {half}, llama_model {whole}"]
    assert npu_text(bert) == f"on NPU0 {half}, NPU1 {half}"
    assert main(["down", "tp"]) == 0
