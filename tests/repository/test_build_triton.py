"""The built seed repository loads in a real tritonserver: both models READY through the `ge` glue."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.http as httpclient

from tests.conftest import run_triton
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.repository.build import MANIFEST_NAME, build_demo_repository
from triton_ge_console.repository.demo_models import demo_bytes


def test_seed_repository_serves_both_models(
    tmp_path_factory: pytest.TempPathFactory, triton_dist: TritonDistribution
) -> None:
    """Triton ignores the manifest file in the repository root, loads llama and bert, and llama answers."""
    root = tmp_path_factory.mktemp("seed-triton")
    backends = root / "backends"
    install_backend_dir(backends, triton_dist)
    repo = root / "repo"
    build_demo_repository(repo)
    assert (repo / MANIFEST_NAME).is_file()
    with run_triton(triton_dist, repo, backends, models=("llama_model", "bert_model")) as server:
        client = httpclient.InferenceServerClient(server.http_hostport)
        index = {entry["name"]: entry for entry in client.get_model_repository_index()}
        assert set(index) == {"llama_model", "bert_model"}, server.log()
        assert all(entry.get("state") == "READY" for entry in index.values()), (index, server.log())
        ids = np.random.default_rng(1).integers(0, 32000, size=(2, 6), dtype=np.int64)
        tensor = httpclient.InferInput("input_ids", list(ids.shape), "INT64")
        tensor.set_data_from_numpy(ids)
        logits = client.infer("llama_model", [tensor]).as_numpy("logits")
    direct = ort.InferenceSession(demo_bytes("demo:llama"), providers=["CPUExecutionProvider"])
    (expected,) = direct.run(None, {"input_ids": ids})
    assert logits is not None and logits.shape == (2, 6, 32000)
    np.testing.assert_allclose(logits, expected, atol=1e-4)
