"""An OM served by tritonserver through the fake acl as an older CANN and as an Ascend 310 host would
have it: numpy_to_ptr/ptr_to_numpy before 6.0.1, no utilization call, DDR where HBM answers 0/0."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.http as httpclient

from tests.backend_glue.conftest import FAKES, server_env
from tests.backend_glue.metrics import metric_samples, model_value
from tests.conftest import run_triton
from tests.models import DENSE_CONFIG, dense_model, param, write_fake_om, write_model
from tests.waiting import wait_until
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir


@pytest.mark.parametrize("version", ["cann-6.0.0-910", "cann-7.0-310"])
def test_an_om_serves_as_each_cann_version_has_it(version: str, tmp_path: Path,
                                                  triton_dist: TritonDistribution) -> None:
    install_backend_dir(tmp_path / "backends", triton_dist)
    folder = write_model(tmp_path / "repo", "om_dense", DENSE_CONFIG.format(
        backend="ge", extra=param("om_model_path", "dense.om") + "\n" + param("device_ids", "1")), None)
    write_fake_om(folder / "1", dense_model(seed=3), gears=(1, 2, 4, 8), name="dense.om")
    source = str(Path(__file__).resolve().parents[2] / "src")  # this checkout's glue, not the installed one
    env = server_env(PYTHONPATH=os.pathsep.join([str(FAKES), source]), FAKE_ACL_CANN=version,
                     FAKE_ACL_DEVICE_GIB="16", GE_GLUE_RUN_DIR=str(tmp_path / "run"))
    repo, backends = tmp_path / "repo", tmp_path / "backends"
    with env, run_triton(triton_dist, repo, backends, models=("om_dense",)) as server:
        x = np.random.default_rng(6).standard_normal((3, 4)).astype(np.float32)
        with httpclient.InferenceServerClient(server.http_hostport) as client:
            tensor = httpclient.InferInput("x", [3, 4], "FP32")
            tensor.set_data_from_numpy(x)
            result = client.infer("om_dense", [tensor])
        session = ort.InferenceSession(str(folder / "1" / "dense.source.onnx"),
                                       providers=["CPUExecutionProvider"])
        y, z = session.run(None, {"x": x})
        np.testing.assert_allclose(result.as_numpy("y"), y, atol=1e-5)
        np.testing.assert_allclose(result.as_numpy("z"), z, atol=1e-5)
        assert wait_until(lambda: model_value(server, "ge_d2h_bytes_total", "om_dense")) == 2 * 3 * 3 * 4
        totals = [s.value for s in metric_samples(server, "ge_device_memory_total_bytes")
                  if s.labels == {"device": "1", "kind": "npu"}]
        assert totals == [16 * (1 << 30)]  # the fake card's own memory (DDR on a 310), not the ledger
