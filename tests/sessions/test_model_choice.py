"""Which models a session serves and which session a model names: `up SPEC --model NAME` serves only those
(a misspelled one is refused before anything starts), and a verb naming a model with several sessions
running picks the one that serves it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.sessions.conftest import module_sessions
from triton_ge_console.cli import main
from triton_ge_console.sessions.act.control import TritonControl
from triton_ge_console.sessions.lifecycle import restart
from triton_ge_console.sessions.server import paths
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry, SessionRecord
from triton_ge_console.triton_terms import MODEL_READY

SPEC = """\
name: pair
server:
  metrics: {interval_ms: 500}
models:
  - name: bert_model
    backend: ge
    source: demo:bert
    max_batch_size: 4
  - name: other_bert
    backend: ge
    source: demo:bert
    max_batch_size: 4
"""


def write_spec(folder: Path) -> Path:
    """Two cheap `ge` models (the demo BERT twice) in one spec."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "deploy.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    return spec


def test_up_refuses_a_misspelled_model_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # no server marker: a tritonserver started here would fail the test
    spec = write_spec(tmp_path)
    assert main(["up", str(spec), "--model", "bert_modle"]) == 1
    error = capsys.readouterr().err.strip()
    assert error == (f"ge-console: error: {spec}: no model 'bert_modle' (did you mean 'bert_model'?); "
                     f"it has bert_model, other_bert")
    assert Registry().scan() == ([], [])
    assert not paths.session_dir("pair").exists()


@dataclass
class Pair:
    """Two running sessions of one spec: `one` serves other_bert only, `both` serves both models."""

    one: SessionRecord
    both: SessionRecord
    state_dir: Path


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """`up SPEC --model other_bert --name one` and `up SPEC --name both`, stopped at the end."""
    with module_sessions(tmp_path_factory, "choice", write_spec,
                         {"name": "one", "models": ("other_bert",)}, {"name": "both"}) as up:
        yield Pair(*up.records, up.state_dir)


@pytest.fixture
def at_pair(pair: Pair, monkeypatch: pytest.MonkeyPatch) -> Pair:
    """The pair, with the CLI and the registry pointed at its state dir."""
    monkeypatch.setenv(STATE_DIR_ENV, str(pair.state_dir))
    return pair


def _ready(record: SessionRecord) -> set[str]:
    """The models the session's Triton has READY."""
    return {m.name for m in TritonControl(record.http_url).index() if m.state == MODEL_READY}


@pytest.mark.server
def test_up_spec_with_model_serves_only_the_models_named_even_after_a_restart(at_pair: Pair) -> None:
    pair = at_pair
    assert pair.one.models == ("other_bert",)
    assert _ready(pair.one) == {"other_bert"}
    assert pair.one.repository is not None
    assert sorted(p.name for p in pair.one.repository.iterdir() if p.is_dir()) == ["other_bert"]
    again = restart(pair.one, Registry(), timeout=240)
    assert again.models == ("other_bert",) and _ready(again) == {"other_bert"}
    assert _ready(pair.both) == {"bert_model", "other_bert"}


@pytest.mark.server
def test_a_model_verb_picks_the_one_running_session_that_serves_the_model(
    at_pair: Pair, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["reload", "bert_model"]) == 0  # only `both` serves it
    assert "bert_model" in capsys.readouterr().out
    assert main(["unload", "other_bert"]) == 2  # both serve it: which one is the user's call (usage)
    assert capsys.readouterr().err.strip() == (
        "ge-console: error: 2 running sessions serve other_bert (both, one): name one with -s NAME")
    assert main(["load", "no_such_model"]) == 1
    assert capsys.readouterr().err.strip() == (
        "ge-console: error: no running session serves no_such_model (running: both, one)")
    assert main(["unload", "other_bert", "-s", "one"]) == 0
    assert _ready(Registry().load("one")) == set()
    assert main(["load", "other_bert"]) == 2  # still in both repositories: both can serve it
    assert "2 running sessions serve other_bert" in capsys.readouterr().err
    assert main(["load", "other_bert", "-s", "one"]) == 0


@pytest.mark.server
def test_status_of_a_model_is_the_status_of_the_session_serving_it(
    at_pair: Pair, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["status", "bert_model", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "both"
    assert main(["status", "other_bert"]) == 2
    assert "2 running sessions serve other_bert (both, one)" in capsys.readouterr().err
    assert main(["status", "nothing"]) == 1
    assert capsys.readouterr().err.strip() == (
        "ge-console: error: no session named 'nothing' and no running session serves a model so named "
        "(running: both, one)")
