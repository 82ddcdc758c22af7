"""Load a deployment spec (YAML, safe_load semantics) into a DeploymentSpec, with every problem at once."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from triton_ge_console.ge_backends import (
    NPU_GE_PARAMETERS,
    is_ge_option,
    npu_ge_cmdline_problem,
    npu_ge_id_list,
)
from triton_ge_console.npu_smi import host_npu_count
from triton_ge_console.repository.spec.devices import check_devices
from triton_ge_console.repository.spec.k8s import read_kubernetes
from triton_ge_console.repository.spec.models import model_name_problem, read_model
from triton_ge_console.repository.spec.nodes import Problems, Reader, SpecError, SpecProblem, join, suggest
from triton_ge_console.repository.spec.options import check_scheduling
from triton_ge_console.repository.spec.types import (
    RESTART_POLICIES,
    DeploymentSpec,
    KubernetesSpec,
    ModelSpec,
    ServerSpec,
)
from triton_ge_console.triton_args import extra_args_problem

__all__ = ["SpecError", "SpecProblem", "load_spec", "model_name_problem", "parse_spec"]

TOP_KEYS = ("name", "server", "models", "kubernetes")
SERVER_KEYS = (
    "http_port",
    "grpc_port",
    "metrics_port",
    "listen",
    "backend_config",
    "metrics",
    "log_verbose",
    "npu_memory_gib",
    "extra_args",
    "restart",
)
METRICS_KEYS = ("interval_ms", "summary_latencies")
# what npu_ge reads from --backend-config (ge_backends): its seven keys and GE's options
NPU_GE_BACKEND_CONFIG = ("npu_ge reads from --backend-config only " + ", ".join(NPU_GE_PARAMETERS)
                         + " and GE options (ge.*, session.*, graph.*); this key is ignored")
MAX_SPEC_BYTES = 1 << 20  # a deployment spec is a page or two; anything near this is not one
MAX_DEPTH = 32  # nesting of mappings and lists; the deepest real spec field is about 6 levels down
MAX_ALIAS_NODES = 10_000  # nodes aliases may repeat: bounds the work a spec of aliases of aliases makes


def load_spec(path: Path) -> DeploymentSpec:
    """Read a spec file; relative model paths are resolved against the file's folder."""
    try:
        size = path.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise SpecError([SpecProblem(str(path), 0, 0, "", too_big(size))])
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SpecError([SpecProblem(str(path), 0, 0, "", f"cannot read spec: {reason}")]) from None
    return parse_spec(text, str(path), path.resolve().parent, default_name=path.stem)


def parse_spec(
    text: str, file: str = "deploy.yaml", base_dir: Path | None = None, default_name: str = "deployment"
) -> DeploymentSpec:
    """Parse spec text; `file` labels problems, `base_dir` anchors relative paths."""
    problems = Problems(file)
    if len(text) > MAX_SPEC_BYTES:
        problems.items.append(SpecProblem(file, 0, 0, "", too_big(len(text))))
        problems.raise_if_any()
    loader, root = yaml_root(text, problems)
    reader = Reader(loader, problems)
    if root is None:
        problems.add(None, "", "the spec is empty: it needs at least 'models:'")
        problems.raise_if_any()
    assert root is not None
    entries = reader.mapping(root, "", TOP_KEYS)
    problems.raise_if_any()
    assert entries is not None
    name = default_name
    if "name" in entries:
        name = reader.text(entries["name"][1], "name") or default_name
    server = _server(reader, entries["server"][1]) if "server" in entries else ServerSpec()
    models = _models(reader, entries["models"][1], base_dir) if "models" in entries else None
    kubernetes: KubernetesSpec | None = KubernetesSpec()
    if "kubernetes" in entries:
        kubernetes = read_kubernetes(reader, entries["kubernetes"][1])
    if "models" not in entries:
        problems.add(root, "models", "is required: list at least one model")
    problems.raise_if_any()
    assert server is not None and models is not None and kubernetes is not None
    models = _npu_ge_command_line_npus(models, server)
    check_scheduling(problems, entries["models"][1].value, models, server)
    _check_devices(problems, entries["models"][1], models, server)
    path = None if base_dir is None else base_dir / Path(file).name
    return DeploymentSpec(name=name, path=path, server=server, models=models, kubernetes=kubernetes)


def _npu_ge_command_line_npus(models: tuple[ModelSpec, ...], server: ServerSpec) -> tuple[ModelSpec, ...]:
    """npu_ge models naming no NPUs, placed on server.backend_config.npu_ge.device_ids: native npu_ge reads
    the command line's list and a model's device_ids over it (model_state.cpp DisposeConfig, then
    ParseModelParametersConfig), so the build writes those NPUs where it would write the default 0."""
    text = next((v for b, k, v in server.backend_config if (b, k) == ("npu_ge", "device_ids")), None)
    ids = npu_ge_id_list(text) or () if text is not None else ()  # repeats refused: npu_ge_cmdline_problem
    if not ids:
        return models
    return tuple(dataclasses.replace(m, instance_group=dataclasses.replace(m.instance_group, device_ids=ids))
                 if m.backend == "npu_ge" and not m.instance_group.named_devices else m for m in models)


def _check_devices(
    problems: Problems, node: yaml.Node, models: tuple[ModelSpec, ...], server: ServerSpec
) -> None:
    """NPUs the host lacks (asked of npu-smi only when a model names more than NPU 0) and over-commitment."""
    many = any(d > 0 for model in models for d in model.instance_group.device_ids)
    check_devices(problems, node.value, models, server, host_npu_count() if many else None)
    problems.raise_if_any()


def yaml_root(text: str, problems: Problems) -> tuple[yaml.SafeLoader, yaml.Node | None]:
    """The document's root node (None for an empty document); a syntax error is raised as a SpecError."""
    try:
        _check_events(text, problems)
        loader = yaml.SafeLoader(text)  # its reader refuses control characters already
        root = loader.get_single_node()
        if root is not None:
            loader.construct_document(root)  # what safe_load would refuse (e.g. python/* tags) stops here
        return loader, root
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        reason = exc.problem or exc.context or "invalid YAML"
        kind = "unsupported YAML" if isinstance(exc, yaml.constructor.ConstructorError) else "YAML syntax"
        problems.items.append(SpecProblem(problems.file, line, column, "", f"{kind}: {reason}"))
    except yaml.reader.ReaderError as exc:
        line, column = _position(text, exc.position)
        character = f"U+{exc.character:04X}" if isinstance(exc.character, int) else repr(exc.character)
        message = f"YAML: {exc.reason} ({character})"
        problems.items.append(SpecProblem(problems.file, line, column, "", message))
    except yaml.YAMLError as exc:
        problems.items.append(SpecProblem(problems.file, 1, 1, "", f"YAML syntax: {exc}"))
    problems.raise_if_any()
    raise AssertionError("unreachable: a YAML error was recorded")


def _position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset."""
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def too_big(size: int) -> str:
    """The problem of an oversized spec."""
    return f"{size} bytes is too large for a deployment spec (at most {MAX_SPEC_BYTES})"


def _check_events(text: str, problems: Problems) -> None:
    """Refuse, before building nodes, nesting deeper than MAX_DEPTH (PyYAML builds them recursively) and
    aliases repeating more than MAX_ALIAS_NODES nodes (every reader of the spec walks each repeat)."""
    open_nodes: list[list[Any]] = []  # per open collection: its anchor, its node count so far
    sizes: dict[str, int] = {}  # anchor → node count of its node, aliases in it counted expanded
    repeated = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        size = 0
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_nodes) >= MAX_DEPTH:
                _refuse(problems, event, f"nested more than {MAX_DEPTH} levels deep: not a spec")
            open_nodes.append([event.anchor, 1])
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, size = open_nodes.pop()
        elif isinstance(event, yaml.ScalarEvent):
            anchor, size = event.anchor, 1
        elif isinstance(event, yaml.AliasEvent):
            anchor, size = None, _alias_size(problems, event, sizes, open_nodes)
            repeated += size
            if repeated > MAX_ALIAS_NODES:
                _refuse(problems, event, f"aliases repeat more than {MAX_ALIAS_NODES} nodes here: not a "
                        "deployment spec (a spec shares a few settings with aliases, not thousands)")
        if size:
            if anchor is not None:
                sizes[anchor] = size
            if open_nodes:
                open_nodes[-1][1] += size


def _alias_size(problems: Problems, event: yaml.AliasEvent, sizes: dict[str, int],
                open_nodes: list[list[Any]]) -> int:
    """The nodes an alias repeats (0 for an unknown anchor: the composer names it); one inside the node it
    names is refused (its expansion never ends)."""
    if event.anchor in sizes:
        return sizes[event.anchor]
    if any(anchor == event.anchor for anchor, _ in open_nodes):
        _refuse(problems, event, f"alias '{event.anchor}' inside the node it names: not a deployment spec")
    return 0


def _refuse(problems: Problems, event: yaml.Event, message: str) -> None:
    """Stop with one problem at the event's position."""
    mark = event.start_mark
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    problems.items.append(SpecProblem(problems.file, line, column, "", message))
    problems.raise_if_any()


def _models(reader: Reader, node: yaml.Node, base_dir: Path | None) -> tuple[ModelSpec, ...] | None:
    """All models; names must be unique."""
    items = reader.sequence(node, "models")
    if items is None:
        return None
    if not items:
        reader.problems.add(node, "models", "must list at least one model")
        return None
    models = [read_model(reader, item, f"models[{i}]", base_dir) for i, item in enumerate(items)]
    seen: dict[str, int] = {}
    for i, model in enumerate(models):
        if model is None:
            continue
        if model.name in seen:
            name_node = _key_value(items[i], "name") or items[i]
            reader.problems.add(
                name_node,
                f"models[{i}].name",
                f"duplicate model name '{model.name}' (also models[{seen[model.name]}])",
            )
        seen.setdefault(model.name, i)
    return tuple(m for m in models if m is not None)


def _key_value(node: yaml.Node, key: str) -> yaml.Node | None:
    """The value node of key in a mapping node."""
    if isinstance(node, yaml.MappingNode):
        return next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
    return None


def _server(reader: Reader, node: yaml.Node) -> ServerSpec | None:
    """The `server:` section."""
    entries = reader.mapping(node, "server", SERVER_KEYS)
    if entries is None:
        return None
    fields: dict[str, object] = {}
    for key in ("http_port", "grpc_port", "metrics_port"):
        if key in entries:
            fields[key] = reader.integer(entries[key][1], join("server", key), 0, 65535)
    if "listen" in entries:
        fields["listen"] = reader.text(entries["listen"][1], "server.listen")
    if "log_verbose" in entries:
        fields["log_verbose"] = reader.integer(entries["log_verbose"][1], "server.log_verbose", 0)
    if "npu_memory_gib" in entries:
        fields["npu_memory_gib"] = reader.number(entries["npu_memory_gib"][1], "server.npu_memory_gib", True)
    if "backend_config" in entries:
        fields["backend_config"] = _backend_config(reader, entries["backend_config"][1])
    if "metrics" in entries:
        fields.update(_metrics(reader, entries["metrics"][1]))
    if "extra_args" in entries:
        fields["extra_args"] = _extra_args(reader, entries["extra_args"][1])
    if "restart" in entries:
        fields["restart"] = _restart(reader, entries["restart"][1])
    if any(value is None for value in fields.values()):
        return None
    return ServerSpec(**fields)  # type: ignore[arg-type]


def _restart(reader: Reader, node: yaml.Node) -> str | None:
    """`server.restart`: whether the session's supervisor restarts a server that crashed."""
    value = reader.text(node, "server.restart")
    if value is not None and value not in RESTART_POLICIES:
        hint = suggest(value, RESTART_POLICIES)
        reader.problems.add(node, "server.restart", f"unknown policy '{value}'{hint}")
        return None
    return value


def _metrics(reader: Reader, node: yaml.Node) -> dict[str, object]:
    """`server.metrics`: interval and whether Triton keeps latency summaries (for p50/p99)."""
    entries = reader.mapping(node, "server.metrics", METRICS_KEYS)
    if entries is None:
        return {"metrics_interval_ms": None}
    fields: dict[str, object] = {}
    if "interval_ms" in entries:
        fields["metrics_interval_ms"] = reader.integer(
            entries["interval_ms"][1], "server.metrics.interval_ms", 1
        )
    if "summary_latencies" in entries:
        fields["summary_latencies"] = reader.boolean(
            entries["summary_latencies"][1], "server.metrics.summary_latencies"
        )
    return fields


def _backend_config(reader: Reader, node: yaml.Node) -> tuple[tuple[str, str, str], ...] | None:
    """backend → {key: value} as (backend, key, value) triples for --backend-config."""
    backends = reader.mapping(node, "server.backend_config")
    if backends is None:
        return None
    triples: list[tuple[str, str, str]] = []
    ok = True
    for backend, (_, options_node) in backends.items():
        path = join("server.backend_config", backend)
        options = reader.mapping(options_node, path)
        if options is None:
            ok = False
            continue
        for key, (key_node, value_node) in options.items():
            if backend == "npu_ge" and key not in NPU_GE_PARAMETERS and not is_ge_option(key):
                hint = suggest(key, NPU_GE_PARAMETERS)
                reader.problems.add(key_node, join(path, key),
                                    NPU_GE_BACKEND_CONFIG + (hint if hint.startswith("; did") else ""))
                ok = False
                continue
            value = reader.scalar_text(value_node, join(path, key))
            problem = (npu_ge_cmdline_problem(key, value) if backend == "npu_ge" and value is not None
                       else None)
            if problem is not None:
                reader.problems.add(value_node, join(path, key), problem)
            ok = ok and value is not None and problem is None
            triples.append((backend, key, value or ""))
    return tuple(triples) if ok else None


def _extra_args(reader: Reader, node: yaml.Node) -> tuple[str, ...] | None:
    """tritonserver's extra arguments, refused at load for what they must not do (triton_args)."""
    values = _strings(reader, node, "server.extra_args")
    problem = extra_args_problem(values) if values is not None else None
    if problem:
        reader.problems.add(node, "server.extra_args", problem)
        return None
    return values


def _strings(reader: Reader, node: yaml.Node, path: str) -> tuple[str, ...] | None:
    """A list of strings."""
    items = reader.sequence(node, path)
    if items is None:
        return None
    values = [reader.text(item, f"{path}[{i}]") for i, item in enumerate(items)]
    return None if any(v is None for v in values) else tuple(v for v in values if v is not None)
