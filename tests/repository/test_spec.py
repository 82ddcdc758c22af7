"""Deployment spec loading: the seed spec's values, and every kind of mistake reported at its position."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.repository.spec_helpers import refused
from triton_ge_console.model_files.tensors import TensorSpec
from triton_ge_console.repository import demo_models
from triton_ge_console.repository.build import build_repository
from triton_ge_console.repository.spec.load import MAX_ALIAS_NODES, SpecError, load_spec, parse_spec
from triton_ge_console.repository.spec.types import DynamicBatchingSpec, InstanceGroupSpec
from triton_ge_console.repository.starter import STARTER_SPEC

ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str, name: str = "deploy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def test_seed_spec_is_the_starter_and_loads(tmp_path: Path) -> None:
    """examples/seed.yaml is what `init` writes, and reads into the seed deployment."""
    seed_path = ROOT / "examples" / "seed.yaml"
    assert seed_path.read_text(encoding="utf-8") == STARTER_SPEC
    spec = load_spec(seed_path)
    assert spec.name == "seed"
    assert spec.server.summary_latencies is False  # opt-in: it costs every request
    llama, bert = spec.models
    assert (llama.name, llama.backend, llama.source, llama.max_batch_size) == (
        "llama_model",
        "ge",
        "demo:llama",
        8,
    )
    assert llama.inputs == (TensorSpec("input_ids", "INT64", (-1,)),)
    assert llama.outputs == (TensorSpec("logits", "FP32", (-1, 32000)),)
    assert llama.dynamic_batching == DynamicBatchingSpec((4, 8), 500)
    assert dict(llama.thresholds) == {"queue_depth": 8.0, "p99_ms": 50.0}
    # bert declares no tensors: they are read from the demo ONNX, batch dim dropped
    assert bert.inputs == (
        TensorSpec("input_ids", "INT64", (-1,)),
        TensorSpec("attention_mask", "INT64", (-1,)),
    )
    assert bert.outputs == (TensorSpec("pooled", "FP32", (64,)),)
    assert bert.instance_group == InstanceGroupSpec(1, (1,))


def test_server_section_and_backend_config(tmp_path: Path) -> None:
    """Server options, backend_config triples and metrics settings come through typed."""
    path = _write(
        tmp_path,
        """
        name: lab
        server:
          http_port: 8000
          listen: 0.0.0.0
          backend_config:
            python: {shm-default-byte-size: 1048576, shm-growth-byte-size: 1048576}
            ge: {verbose: true}
          metrics: {interval_ms: 250, summary_latencies: false}
          log_verbose: 1
          npu_memory_gib: 32
          extra_args: [--exit-timeout-secs=5]
        models:
          - {name: m, backend: ge, source: "demo:llama"}
        """,
    )
    spec = load_spec(path)
    assert spec.server.http_port == 8000 and spec.server.grpc_port == 0
    assert spec.server.listen == "0.0.0.0"
    assert spec.server.backend_config == (
        ("python", "shm-default-byte-size", "1048576"),
        ("python", "shm-growth-byte-size", "1048576"),
        ("ge", "verbose", "1"),
    )
    assert (spec.server.metrics_interval_ms, spec.server.summary_latencies) == (250, False)
    assert (spec.server.log_verbose, spec.server.npu_memory_gib) == (1, 32.0)
    assert spec.server.extra_args == ("--exit-timeout-secs=5",)
    model = spec.models[0]
    # no max_batch_size: the ONNX dims are kept whole
    assert model.inputs == (TensorSpec("input_ids", "INT64", (-1, -1)),)
    assert model.versions == (1,)


def test_all_problems_at_once_with_exact_positions(tmp_path: Path) -> None:
    """Several mistakes in one file are all reported, in file order, at line:column of the bad value."""
    path = _write(
        tmp_path,
        """
        name: broken
        server:
          http_port: 99999
          metrcs: {interval_ms: 1000}
        models:
          - name: llama_model
            backend: ge
            source: demo:llama
            max_batch_size: 8
          - name: bert_model
            backend: gee
            source: demo:bert
            max_batch_size: -1
            instance_group: {count: 0, device_ids: [0]}
            thresholds: {queue_depth: many}
        """,
    )
    assert refused(path) == [
        "deploy.yaml:3:14 server.http_port: must be <= 65535",
        "deploy.yaml:4:3 server.metrcs: unknown key 'metrcs'; did you mean 'metrics'?",
        "deploy.yaml:11:14 models[1].backend: unknown backend 'gee'; did you mean 'ge'?",
        "deploy.yaml:13:21 models[1].max_batch_size: must be >= 0",
        "deploy.yaml:14:29 models[1].instance_group.count: must be >= 1",
        "deploy.yaml:15:31 models[1].thresholds.queue_depth: must be a number, not string 'many'",
    ]


def test_unknown_keys_get_a_did_you_mean(tmp_path: Path) -> None:
    """Typos in model keys, nested keys and known GE parameters are errors naming the likely key (only); a
    GE option as a model parameter is refused with where it belongs (npu_ge reads it only from
    --backend-config)."""
    path = _write(
        tmp_path,
        """
        models:
          - name: m
            backend: ge
            source: demo:llama
            max_batch: 4
            dynamic_batching: {prefered_batch_size: [2]}
            parameters: {om_modle_path: /x.om, ge.exec.deviceId: 0, custom_flag: on}
        """,
    )
    assert refused(path) == [
        "deploy.yaml:5:5 models[0].max_batch: unknown key 'max_batch'; did you mean 'max_batch_size'?",
        "deploy.yaml:6:24 models[0].dynamic_batching.prefered_batch_size: unknown key 'prefered_batch_size'; "
        "did you mean 'preferred_batch_size'?",
        "deploy.yaml:7:18 models[0].parameters.om_modle_path: unknown key 'om_modle_path'; "
        "did you mean 'om_model_path'?",
        "deploy.yaml:7:40 models[0].parameters.ge.exec.deviceId: GE option 'ge.exec.deviceId' as a model "
        "parameter is read by neither backend: npu_ge takes ge.* (GEInitialize's options) only from "
        "--backend-config=npu_ge,ge.exec.deviceId=<value> (in a spec: server.backend_config.npu_ge), and the "
        "ge glue runs an OM already compiled by ATC",
    ]


def test_one_typo_gives_one_error(tmp_path: Path) -> None:
    """A misspelled key is read as the key it resembles: its did-you-mean is the only error."""
    path = tmp_path / "deploy.yaml"
    path.write_text(STARTER_SPEC.replace("max_batch_size: 8 ", "max_bach_size: 8 ", 1), encoding="utf-8")
    assert refused(path) == [
        "deploy.yaml:30:5 models[0].max_bach_size: unknown key 'max_bach_size'; "
        "did you mean 'max_batch_size'?",
    ]


def test_a_typo_beside_its_key_is_not_read_as_that_key(tmp_path: Path) -> None:
    """When the key it resembles is also there, the misspelled one is just unknown (no duplicate)."""
    path = _write(
        tmp_path,
        """
        models:
          - name: m
            max_bach_size: 4
            backend: ge
            source: demo:llama
            max_batch_size: 2
        """,
    )
    assert refused(path) == [
        "deploy.yaml:3:5 models[0].max_bach_size: unknown key 'max_bach_size'; "
        "did you mean 'max_batch_size'?",
    ]


def test_bad_types_are_named(tmp_path: Path) -> None:
    """Wrong YAML types say what was found instead."""
    path = _write(
        tmp_path,
        """
        server: [8000]
        models:
          - name: 42
            backend: ge
            source: demo:llama
            versions: one
            max_batch_size: 2.5
            inputs: {name: input_ids}
        """,
    )
    assert refused(path) == [
        "deploy.yaml:1:9 server: must be a mapping, not a list",
        "deploy.yaml:3:11 models[0].name: must be a string, not int 42",
        "deploy.yaml:6:15 models[0].versions: must be a list of version numbers, like [1], not string 'one'",
        "deploy.yaml:7:21 models[0].max_batch_size: must be an integer, not float 2.5",
        "deploy.yaml:8:13 models[0].inputs: must be a list, not a mapping",
    ]


def test_contradicting_the_onnx_graph_is_an_error(tmp_path: Path) -> None:
    """Declared tensors must match the ONNX: name, data type, rank and fixed dims, each at its position."""
    path = _write(
        tmp_path,
        """
        models:
          - name: llama_model
            backend: ge
            source: demo:llama
            max_batch_size: 8
            inputs:
              - {name: input_ids, data_type: INT32, dims: [-1]}
            outputs:
              - {name: logits, data_type: FP32, dims: [-1, 32001]}
              - {name: hidden, data_type: FP32, dims: [-1, 64]}
          - name: bert_model
            backend: ge
            source: demo:bert
            max_batch_size: 4
            inputs:
              - {name: input_ids, data_type: TYPE_INT64, dims: [-1, 1]}
        """,
    )
    assert refused(path) == [
        "deploy.yaml:7:38 models[0].inputs[0].data_type: is INT32 but the ONNX graph says INT64",
        "deploy.yaml:9:52 models[0].outputs[0].dims[1]: is 32001 but the ONNX graph fixes it to 32000",
        "deploy.yaml:10:16 models[0].outputs[1].name: the ONNX graph has no tensor 'hidden'; "
        "choose one of logits",
        "deploy.yaml:16:7 models[1].inputs: ONNX input 'attention_mask' is not declared "
        "(the model needs every "
        "input; omit the list to read it from the ONNX)",
        "deploy.yaml:16:56 models[1].inputs[0].dims: has 2 dims [-1, 1] but the ONNX graph has 1: [-1] "
        "(batch dim excluded when max_batch_size > 0)",
    ]


def test_onnx_file_source_relative_to_spec_and_om_needs_tensors(tmp_path: Path) -> None:
    """A relative .onnx source resolves beside the spec; an .om without ONNX must declare its tensors."""
    models_dir = tmp_path / "models"
    models_dir.mkdir()
    (models_dir / "llama.onnx").write_bytes(demo_models.demo_bytes("demo:llama"))
    (models_dir / "llama.om").write_bytes(b"fake om")
    path = _write(
        tmp_path,
        """
        models:
          - {name: from_onnx, backend: npu_ge, source: models/llama.onnx, max_batch_size: 2}
          - {name: om_with_onnx, backend: ge, source: models/llama.om, onnx: models/llama.onnx}
          - {name: om_alone, backend: ge, source: models/llama.om}
        """,
    )
    assert refused(path) == [
        "deploy.yaml:4:43 models[2].inputs: is required: an .om model without 'onnx:' "
        "has no graph to read it from",
        "deploy.yaml:4:43 models[2].outputs: is required: an .om model without 'onnx:' "
        "has no graph to read it "
        "from",
    ]
    path.write_text(path.read_text().replace("om_alone, backend: ge", "om_alone, backend: npu_ge"))
    assert refused(path)[0].endswith(
        "models[2].source: backend npu_ge compiles an ONNX online: give an .onnx "
        "source, or 'onnx:' beside the .om"
    )
    path.write_text(path.read_text().splitlines()[0] + "\n" + "\n".join(path.read_text().splitlines()[1:3]))
    spec = load_spec(path)
    from_onnx, om_with_onnx = spec.models
    assert from_onnx.onnx_path == models_dir / "llama.onnx"
    assert from_onnx.inputs == (TensorSpec("input_ids", "INT64", (-1,)),)
    assert (om_with_onnx.om_path, om_with_onnx.onnx_path) == (
        models_dir / "llama.om",
        models_dir / "llama.onnx",
    )


def test_missing_and_wrong_kind_of_source(tmp_path: Path) -> None:
    """Missing files, wrong suffixes, unknown demos and non-ONNX bytes are errors at the source."""
    (tmp_path / "weights.bin").write_bytes(b"x")
    (tmp_path / "garbage.onnx").write_bytes(b"not a protobuf \xff\xff")
    path = _write(
        tmp_path,
        """
        models:
          - {name: a, backend: ge, source: nowhere.onnx}
          - {name: b, backend: ge, source: weights.bin}
          - {name: c, backend: ge, source: "demo:lama"}
          - {name: d, backend: ge, source: garbage.onnx}
          - {name: e, backend: ge, source: "demo:bert", onnx: x.onnx}
        """,
    )
    problems = refused(path)
    assert problems[0] == f"deploy.yaml:2:36 models[0].source: no such file: {tmp_path / 'nowhere.onnx'}"
    assert problems[1] == (
        "deploy.yaml:3:36 models[1].source: 'weights.bin' must be a .onnx or .om file or one of "
        "demo:llama, demo:bert, demo:llama_kv"
    )
    assert (
        problems[2]
        == "deploy.yaml:4:36 models[2].source: unknown demo 'demo:lama'; did you mean 'demo:llama'?"
    )
    assert (
        problems[3].startswith("deploy.yaml:5:36 models[3].source: ") and "not an ONNX model" in problems[3]
    )
    assert problems[4] == "deploy.yaml:6:55 models[4].onnx: only applies when source is an .om file"


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("../escape", "must not contain a path separator"),
        ("a\\\\b", "must not contain a path separator"),
        ("..", "must not contain '..'"),
        (".hidden", "may hold only letters, digits, '_', '-' and '.', and must not start with '.' or '-'"),
        ("has space", "may hold only letters"),
        ("''", "must not be empty"),
        pytest.param("m" * 256, f"'{'m' * 40}… (256 chars)' is too long: Triton serves a model from the "
                     "folder of its name, and a folder name has at most 255 characters", id="256 characters"),
    ],
)
def test_model_names_must_be_safe_folder_names(tmp_path: Path, name: str, reason: str) -> None:
    """Names that would escape the repository or that Triton would not load are refused."""
    path = _write(
        tmp_path,
        f"""
        models:
          - name: {name}
            backend: ge
            source: demo:llama
        """,
    )
    (problem,) = refused(path)
    assert problem.startswith("deploy.yaml:2:11 models[0].name: ")
    assert reason in problem


def test_the_longest_name_a_folder_can_have_builds(tmp_path: Path) -> None:
    """255 characters, the most a folder name has, pass the spec and build (300 used to pass the spec and
    fail deep in build: 'File name too long' with the staging path)."""
    name = "m" * 255
    path = _write(tmp_path, f"models:\n  - name: {name}\n    backend: ge\n    source: demo:bert\n")
    report = build_repository(load_spec(path), tmp_path / "repo")
    assert (tmp_path / "repo" / name / "config.pbtxt").is_file()
    assert report.lines()[0].startswith(f"added      {name}")


def test_duplicates_versions_and_static_model(tmp_path: Path) -> None:
    """Duplicate names and keys, bad versions, and npu_ge's static_model with dynamic batching are
    refused."""
    path = _write(
        tmp_path,
        """
        models:
          - name: m
            backend: ge
            backend: npu_ge
            source: demo:llama
            versions: [1, 1]
          - name: m
            backend: npu_ge
            source: demo:llama
            versions: [0]
            max_batch_size: 4
            dynamic_batching: {preferred_batch_size: [2, 8]}
            parameters: {static_model: 1, execution_mode: gpu}
        """,
    )
    assert refused(path) == [
        "deploy.yaml:4:5 models[0].backend: duplicate key (first at line 3)",
        "deploy.yaml:6:15 models[0].versions: lists a version twice",
        "deploy.yaml:10:16 models[1].versions[0]: must be >= 1",
        "deploy.yaml:12:23 models[1].dynamic_batching: cannot be used with parameters.static_model "
        "(GE's static graph needs fixed shapes)",
        "deploy.yaml:12:46 models[1].dynamic_batching.preferred_batch_size: "
        "8 is larger than max_batch_size 4",
        "deploy.yaml:13:51 models[1].parameters.execution_mode: unknown mode 'gpu'; did you mean 'npu'?",
    ]


def test_duplicate_model_names(tmp_path: Path) -> None:
    """Two models with one name cannot share a repository folder."""
    path = _write(
        tmp_path,
        """
        models:
          - {name: m, backend: ge, source: "demo:llama"}
          - {name: m, backend: ge, source: "demo:bert"}
        """,
    )
    assert refused(path) == ["deploy.yaml:3:12 models[1].name: duplicate model name 'm' (also models[0])"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "deploy.yaml:1:1: the spec is empty: it needs at least 'models:'"),
        ("models: [\n", "deploy.yaml:2:1: YAML syntax: expected the node content, but found '<stream end>'"),
        ("- 1\n", "deploy.yaml:1:1: must be a mapping, not a list"),
        ("name: x\n", "deploy.yaml:1:1 models: is required: list at least one model"),
        ("models: []\n", "deploy.yaml:1:9 models: must list at least one model"),
        (
            "models: !!python/object:os.system {}\n",
            "deploy.yaml:1:9: unsupported YAML: could not determine a constructor "
            "for the tag 'tag:yaml.org,2002:python/object:os.system'",
        ),
    ],
)
def test_document_level_problems(tmp_path: Path, text: str, expected: str) -> None:
    """Empty files, syntax errors, wrong roots and unsafe tags are positioned problems, never tracebacks."""
    assert refused(_write(tmp_path, text)) == [expected]


def test_unreadable_spec_file(tmp_path: Path) -> None:
    """A missing spec file is one problem naming the file."""
    assert refused(tmp_path / "missing.yaml") == [
        "missing.yaml: cannot read spec: No such file or directory"
    ]


def test_parse_spec_without_a_file() -> None:
    """parse_spec labels problems with the given name (used for the built-in seed)."""
    with pytest.raises(SpecError, match=r"^inline\.yaml:1:9 models: must be a list, not int 3$"):
        parse_spec("models: 3", "inline.yaml")


def test_a_port_in_the_extra_args_that_is_no_number_is_named(tmp_path: Path) -> None:
    """tritonserver would refuse it only once started; the spec names file, line and field at once."""
    path = _write(
        tmp_path,
        """
        server:
          extra_args: [--exit-timeout-secs=5, --metrics-port, 80x2]
        models:
          - name: llama
            backend: ge
            source: demo:llama
        """,
    )
    assert refused(path) == [
        "deploy.yaml:2:15 server.extra_args: tritonserver argument --metrics-port=80x2: not a port number "
        "(1-65535)",
    ]


def test_a_listen_address_in_the_extra_args_is_refused_for_server_listen(tmp_path: Path) -> None:
    """Triton would listen where the last --http-address says, past the token guard of an exposed listen
    address and away from the recorded URL: the spec says where to set it instead."""
    path = _write(
        tmp_path,
        """
        server:
          extra_args: [--http-address=0.0.0.0]
        models:
          - name: llama
            backend: ge
            source: demo:llama
        """,
    )
    assert refused(path) == [
        "deploy.yaml:2:15 server.extra_args: tritonserver argument --http-address: give the listen address "
        "as server.listen or up's --listen instead (ge-console records it and guards an exposed one)",
    ]


MODEL_ENTRY = "{name: m, backend: ge, source: demo:bert}"  # a mapping of 3 pairs: 7 nodes


def test_a_spec_of_many_aliases_is_refused_at_the_alias_past_the_bound() -> None:
    """140,000 aliases of one model (980 KB) are refused at the alias whose repeated nodes pass
    MAX_ALIAS_NODES, before any model is read (each alias was read as a model: 85 s of CPU)."""
    text = f"models:\n  - &m {MODEL_ENTRY}\n" + "  - *m\n" * 140_000
    with pytest.raises(SpecError) as caught:
        parse_spec(text)
    past = MAX_ALIAS_NODES // 7 + 1  # the first alias whose 7 nodes take the count past the bound
    assert [str(p) for p in caught.value.problems] == [
        f"deploy.yaml:{2 + past}:5: aliases repeat more than {MAX_ALIAS_NODES} nodes here: not a "
        "deployment spec (a spec shares a few settings with aliases, not thousands)"]


def test_nested_aliases_count_every_node_they_repeat() -> None:
    """Aliases of aliases (a billion laughs) count what they expand to, and an alias inside the node it
    names (a recursive one) is refused."""
    laughs = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    laughs += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    with pytest.raises(SpecError) as caught:
        parse_spec("\n".join(laughs) + "\n")
    # a1 and a2 repeat 10 × 11 and 10 × 111 nodes; a3's 8th alias of a2 (1111 more) passes the bound
    assert [str(p) for p in caught.value.problems] == [
        f"deploy.yaml:4:{10 + 5 * 7}: aliases repeat more than {MAX_ALIAS_NODES} nodes here: not a "
        "deployment spec (a spec shares a few settings with aliases, not thousands)"]
    with pytest.raises(SpecError) as caught:
        parse_spec("models: &m [*m]\n")
    assert [str(p) for p in caught.value.problems] == [
        "deploy.yaml:1:13: alias 'm' inside the node it names: not a deployment spec"]


def test_aliases_that_share_settings_load() -> None:
    """Aliases are read as safe_load reads them, up to the bound and not past it."""
    models = "".join(f"  - {{name: m{i}, backend: ge, source: demo:bert, instance_group: *ig}}\n"
                     for i in range(1, 20))
    first = "models:\n  - {name: m0, backend: ge, source: demo:bert, instance_group: &ig {count: 2}}\n"
    spec = parse_spec(first + models)
    assert [model.instance_group.count for model in spec.models] == [2] * 20
    for extra, refused_here in ((0, False), (1, True)):  # an alias repeating exactly the bound, then one more
        shared = "shared: &s [" + ", ".join(["x"] * (MAX_ALIAS_NODES - 1 + extra)) + "]\n"
        with pytest.raises(SpecError) as caught:
            parse_spec(shared + "again: *s\n")
        assert ("aliases repeat more than" in str(caught.value)) == refused_here, str(caught.value)


def test_server_restart_is_read_and_a_wrong_policy_named_at_its_place(tmp_path: Path) -> None:
    """`server.restart: on-crash` is the spec's way to `up --restart on-crash`; anything else is one line."""
    body = """
        server:
          restart: {}
        models:
          - name: llama
            backend: ge
            source: demo:llama
        """
    assert load_spec(_write(tmp_path, body.format("on-crash"))).server.restart == "on-crash"
    assert load_spec(_write(tmp_path, body.format("never"))).server.restart == "never"
    assert refused(_write(tmp_path, body.format("on-crsh"))) == [
        "deploy.yaml:2:12 server.restart: unknown policy 'on-crsh'; did you mean 'on-crash'?",
    ]
    assert refused(_write(tmp_path, body.format("[]"))) == [
        "deploy.yaml:2:12 server.restart: must be a string, not a list",
    ]
