"""A session's console thresholds come from its spec, read below both views (no server needed)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from triton_ge_console.sessions.observe.thresholds import thresholds_of
from triton_ge_console.sessions.server.registry import SessionRecord

SEED = Path(__file__).resolve().parents[3] / "examples" / "seed.yaml"


def _record(spec: Path | None) -> SessionRecord:
    """A session as registered, started from spec (or from a repository when None)."""
    return SessionRecord(name="t", pid=None, started_at=time.time(), http_url="http://127.0.0.1:1",
                         grpc_url=None, metrics_url=None, repository=None, spec=spec, backend_dir=None,
                         log_path=None, token_ref=None, attached=False, session_dir=None)


def test_a_spec_session_s_thresholds_are_its_models_thresholds() -> None:
    """The seed spec's two models colour at the figures it names."""
    assert thresholds_of(_record(SEED)) == {
        "llama_model": {"queue_depth": 8.0, "p99_ms": 50.0},
        "bert_model": {"queue_depth": 16.0, "p99_ms": 20.0},
    }


def test_no_spec_a_gone_spec_or_a_broken_one_gives_none(tmp_path: Path) -> None:
    """A repository session, a spec deleted since `up` and a spec edited broken colour nothing."""
    broken = tmp_path / "deploy.yaml"
    broken.write_text("models: [\n", encoding="utf-8")
    assert thresholds_of(None) == {}
    assert thresholds_of(_record(None)) == {}
    assert thresholds_of(_record(tmp_path / "gone.yaml")) == {}
    assert thresholds_of(dataclasses.replace(_record(None), spec=broken)) == {}
