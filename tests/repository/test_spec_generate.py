"""A model's `generate:` section: its bounds, the decoupled config it builds, and what it refuses."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.repository.spec_helpers import refused
from triton_ge_console.backend_glue.generate_protocol import limits_from
from triton_ge_console.repository.configgen import config_text, model_config
from triton_ge_console.repository.spec.load import load_spec
from triton_ge_console.repository.spec.types import GenerateSpec


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "deploy.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _generate(tmp_path: Path, section: str) -> Path:
    """deploy.yaml serving one model, gen: the demo KV-cache llama with this `generate:` section."""
    return _write(tmp_path, f"""
        models:
          - name: gen
            backend: ge
            source: demo:llama_kv
            generate: {section}
        """)


def test_generate_section_builds_a_decoupled_config_with_the_request_tensors(tmp_path: Path) -> None:
    """The bounds reach the config as parameters the glue reads back; the request's tensors replace
    the graph's, and the model is decoupled."""
    spec = load_spec(_generate(tmp_path,
                               "{max_tokens: 64, eos_token_id: 2, max_running: 4, kv_cache_mib: 0.5}"))
    model = spec.models[0]
    assert model.generate == GenerateSpec(max_tokens=64, eos_token_id=2, max_running=4, kv_cache_mib=0.5)
    config = model_config(model)
    assert config.model_transaction_policy.decoupled
    assert [(i.name, i.optional) for i in config.input] == [
        ("input_ids", False), ("max_tokens", True), ("temperature", True), ("top_k", True), ("top_p", True),
        ("seed", True)]
    assert [o.name for o in config.output] == ["token_id"]
    parameters = {key: value.string_value for key, value in config.parameters.items()}
    limits = limits_from(parameters, "here")
    assert (limits.max_tokens, limits.eos_token_id, limits.max_running, limits.kv_cache_bytes) == (
        64, 2, 4, 1 << 19)
    assert "decoupled: true" in config_text(model)


def test_generate_true_takes_the_defaults(tmp_path: Path) -> None:
    """`generate: true` is a generate model with the default bounds."""
    spec = load_spec(_write(tmp_path, """
        models:
          - {name: gen, backend: ge, source: "demo:llama_kv", generate: true}
        """))
    assert spec.models[0].generate == GenerateSpec()


def test_what_a_generate_model_cannot_have_is_refused_at_its_line(tmp_path: Path) -> None:
    """A model without a KV cache, declared inputs, dynamic batching, a batch size, a misspelt key."""
    problems = refused(_write(tmp_path, """
        models:
          - name: gen
            backend: ge
            source: demo:llama
            max_batch_size: 4
            dynamic_batching: {}
            generate: {max_token: 8, kv_cache_mib: 0}
        """))
    text = "\n".join(problems)
    assert "deploy.yaml:5:" in text and "cannot generate with this model: not a KV-cache decoder" in text
    assert "demo:llama_kv is one" in text
    assert "max_batch_size: must be 0 for a generate model" in text
    assert "dynamic_batching: a generate model batches its sequences step by step itself" in text
    assert "generate.max_token" in text and "max_tokens" in text  # did you mean
    assert "generate.kv_cache_mib: must be > 0" in text


def _decoupled_folder(tmp_path: Path, source: str) -> Path:
    """A built generate model's folder, its ONNX swapped for `source`'s."""
    from triton_ge_console.repository.demo_models import demo_bytes

    folder = tmp_path / "gen"
    (folder / "1").mkdir(parents=True)
    spec = load_spec(_write(tmp_path, """
        models:
          - {name: gen, backend: ge, source: "demo:llama_kv", generate: true}
        """))
    (folder / "config.pbtxt").write_text(config_text(spec.models[0]), encoding="utf-8")
    (folder / "1" / "model.onnx").write_bytes(demo_bytes(source))
    return folder


def test_validate_accepts_a_built_generate_model_and_refuses_one_without_a_kv_cache(tmp_path: Path) -> None:
    """validate judges a decoupled ge model by its ONNX being a KV decoder (its request tensors are the
    glue's, not the graph's); the generate parameters are known ones."""
    from triton_ge_console.repository.validate import validate_path

    good = validate_path(_decoupled_folder(tmp_path / "good", "demo:llama_kv"))
    assert [p.message for p in good.problems if p.severity == "error"] == []
    assert not any("generate_" in p.message for p in good.problems)
    bad = validate_path(_decoupled_folder(tmp_path / "bad", "demo:llama"))
    errors = [p.message for p in bad.problems if p.severity == "error"]
    assert len(errors) == 1 and "decoupled (generate) model" in errors[0]
    assert "not a KV-cache decoder" in errors[0] and "position_ids" in errors[0]


def test_token_thresholds_are_spec_thresholds(tmp_path: Path) -> None:
    """thresholds takes ttft_p99_ms, itl_p99_ms and kv_cache_share for the console's colours."""
    spec = load_spec(_write(tmp_path, """
        models:
          - name: gen
            backend: ge
            source: demo:llama_kv
            generate: true
            thresholds: {ttft_p99_ms: 200, itl_p99_ms: 20, kv_cache_share: 0.9}
        """))
    assert dict(spec.models[0].thresholds) == {
        "ttft_p99_ms": 200.0, "itl_p99_ms": 20.0, "kv_cache_share": 0.9}


def test_a_tokenizer_adds_text_tensors_and_ships_beside_the_model(tmp_path: Path) -> None:
    """`tokenizer:` (a local tokenizer.json, resolved against the spec's folder): the prompt may be text
    (input_ids turns optional), each response carries text_output, the parameter names the shipped file."""
    from triton_ge_console.repository.build import model_files
    from triton_ge_console.repository.demo_tokenizer import demo_tokenizer_json

    (tmp_path / "tok.json").write_text(demo_tokenizer_json(), encoding="utf-8")
    spec = load_spec(_write(tmp_path, """
        models:
          - {name: gen, backend: ge, source: "demo:llama_kv", generate: {tokenizer: tok.json}}
          - {name: demo, backend: ge, source: "demo:llama_kv", generate: {tokenizer: "demo:llama_kv"}}
        """))
    own, demo = spec.models
    assert own.generate is not None and own.generate.tokenizer == str((tmp_path / "tok.json").resolve())
    config = model_config(own)
    assert [(i.name, i.optional) for i in config.input][:2] == [("input_ids", True), ("text_input", True)]
    assert [o.name for o in config.output] == ["token_id", "text_output"]
    assert config.parameters["generate_tokenizer"].string_value == "tokenizer.json"
    assert model_files(own)["1/tokenizer.json"] == (tmp_path / "tok.json").resolve()
    assert model_files(demo)["1/tokenizer.json"] == demo_tokenizer_json().encode()


def test_a_tokenizer_that_is_not_one_is_refused_at_its_line(tmp_path: Path) -> None:
    """A missing file and a file the tokenizers library cannot read: one problem each, at the key."""
    (tmp_path / "bad.json").write_text('{"model": 3}', encoding="utf-8")
    problems = "\n".join(refused(_write(tmp_path, """
        models:
          - {name: a, backend: ge, source: "demo:llama_kv", generate: {tokenizer: none.json}}
          - {name: b, backend: ge, source: "demo:llama_kv", generate: {tokenizer: bad.json}}
        """)))
    assert "deploy.yaml:3:" in problems and "models[0].generate.tokenizer" in problems
    assert "none.json (a tokenizer.json, or demo:llama_kv)" in problems
    assert "deploy.yaml:4:" in problems and "not a tokenizer the tokenizers library reads" in problems


def test_validate_checks_a_generate_model_s_tokenizer(tmp_path: Path) -> None:
    """generate_tokenizer is a known parameter; its file must be there and be a tokenizer (one error)."""
    from triton_ge_console.repository.build import build_repository
    from triton_ge_console.repository.validate import validate_path

    spec = load_spec(_write(tmp_path, """
        models:
          - {name: gen, backend: ge, source: "demo:llama_kv", generate: {tokenizer: "demo:llama_kv"}}
        """))
    build_repository(spec, tmp_path / "repo")
    good = validate_path(tmp_path / "repo" / "gen")
    assert [p.message for p in good.problems if p.severity == "error"] == []
    assert not any("generate_tokenizer" in p.message for p in good.problems)
    (tmp_path / "repo" / "gen" / "1" / "tokenizer.json").write_text("{}", encoding="utf-8")
    bad = [p.message for p in validate_path(tmp_path / "repo" / "gen").problems if p.severity == "error"]
    assert len(bad) == 1 and "not a tokenizer the tokenizers library reads" in bad[0]
    (tmp_path / "repo" / "gen" / "1" / "tokenizer.json").unlink()
    gone = [p.message for p in validate_path(tmp_path / "repo" / "gen").problems if p.severity == "error"]
    assert len(gone) == 1 and "tokenizer 'tokenizer.json' is not a file" in gone[0]


def test_the_console_tells_a_generate_model_by_its_decoupled_config(tmp_path: Path) -> None:
    """inventory.decoupled: the built config of a `generate:` model is, a plain one is not, an unreadable
    one is not (the console's load panel then runs single inferences)."""
    from triton_ge_console.repository import inventory

    spec = load_spec(_write(tmp_path, """
        models:
          - name: gen
            backend: ge
            source: demo:llama_kv
            generate: {max_tokens: 8}
          - name: plain
            backend: ge
            source: demo:llama
        """))
    for model in spec.models:
        (tmp_path / f"{model.name}.pbtxt").write_text(config_text(model), encoding="utf-8")
    assert inventory.decoupled(tmp_path / "gen.pbtxt")
    assert not inventory.decoupled(tmp_path / "plain.pbtxt")
    (tmp_path / "broken.pbtxt").write_text("model_transaction_policy { decoupled: maybe", encoding="utf-8")
    assert not inventory.decoupled(tmp_path / "broken.pbtxt")
    assert not inventory.decoupled(tmp_path / "missing.pbtxt")


def test_the_context_and_the_step_budget_reach_the_glue(tmp_path: Path) -> None:
    """Issue 39: generate.max_model_len (prompt + max_tokens of one request) and
    max_num_batched_tokens (tokens one step runs), as vLLM names them, reach the config's parameters and
    the glue's limits; a budget below max_running (every running sequence decodes each step) is refused
    at its line."""
    spec = load_spec(_generate(tmp_path, "{max_model_len: 4096, max_num_batched_tokens: 64}"))
    parameters = {key: value.string_value for key, value in model_config(spec.models[0]).parameters.items()}
    limits = limits_from(parameters, "here")
    assert (limits.max_model_len, limits.max_batched_tokens) == (4096, 64)
    assert limits_from({}, "here").max_model_len is None  # not given: the glue takes the export's
    problems = refused(_generate(tmp_path, "{max_running: 16, max_num_batched_tokens: 8}"))
    assert problems == ["deploy.yaml:6:57 models[0].generate.max_num_batched_tokens: 8 is less than "
                        "max_running 16: each step decodes one token of every running sequence within "
                        "this budget"]


def test_the_context_is_the_spec_s_within_what_the_export_declares(tmp_path: Path) -> None:
    """As vLLM settles max_model_len: the spec's, refused beyond what the export declares (ONNX metadata or
    a config.json beside it, the smallest key); else the export's; else 2048, said so."""
    import json

    import pytest

    from triton_ge_console.backend_glue.generate_protocol import with_context
    from triton_ge_console.backend_glue.generate_scheduler import Limits
    from triton_ge_console.model_files.context import declared_context

    onnx_path = tmp_path / "model.onnx"
    assert declared_context({}, onnx_path) is None
    assert declared_context({"max_position_embeddings": "8192"}, onnx_path) == (
        8192, "model.onnx metadata max_position_embeddings")
    (tmp_path / "config.json").write_text(json.dumps({"n_positions": 1024, "seq_length": "x"}))
    declared = declared_context({"max_position_embeddings": "8192"}, onnx_path)
    assert declared == (1024, f"{tmp_path / 'config.json'} n_positions")
    assert with_context(Limits(max_model_len=512), declared, "w") == (Limits(max_model_len=512),
                                                                       "generate.max_model_len")
    assert with_context(Limits(), declared, "w")[0].max_model_len == 1024
    assert with_context(Limits(), None, "w") == (Limits(max_model_len=2048),
                                                 "the default: the model declares none")
    with pytest.raises(ValueError, match=r"^w: generate.max_model_len 2000 is more than the model's "
                                         r"context: 1024 \(.*config.json n_positions\)$"):
        with_context(Limits(max_model_len=2000), declared, "w")
