"""Queue policies in a spec: read into config.pbtxt as Triton's ModelQueuePolicy, mistakes at their line."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.repository.spec_helpers import refused
from triton_ge_console.repository.configgen import config_text
from triton_ge_console.repository.spec.load import load_spec
from triton_ge_console.repository.spec.types import QueuePolicySpec
from triton_ge_console.repository.validate import validate_config_text

HEAD = """
models:
  - name: m
    backend: ge
    source: demo:bert
    max_batch_size: 4
    dynamic_batching:
"""


def _write(tmp_path: Path, batching: str) -> Path:
    path = tmp_path / "deploy.yaml"
    body = textwrap.indent(textwrap.dedent(batching).lstrip("\n"), " " * 6)
    path.write_text(textwrap.dedent(HEAD).lstrip("\n") + body)
    return path


def test_queue_policy_reaches_config_pbtxt_and_passes_validate(tmp_path: Path) -> None:
    """Every queue key lands in config.pbtxt, which validate accepts without a warning."""
    path = _write(tmp_path, """
        priority_levels: 2
        default_priority_level: 2
        default_queue_policy:
          timeout_action: reject
          default_timeout_microseconds: 50000
          allow_timeout_override: true
          max_queue_size: 1
        priority_queue_policy:
          1: {timeout_action: DELAY, default_timeout_microseconds: 1000}
    """)
    (model,) = load_spec(path).models
    batching = model.dynamic_batching
    assert batching is not None
    assert batching.default_queue_policy == QueuePolicySpec("REJECT", 50000, True, 1)
    assert batching.priority_queue_policy == ((1, QueuePolicySpec("DELAY", 1000, False, 0)),)
    text = config_text(model)
    assert "priority_levels: 2\n  default_priority_level: 2\n  default_queue_policy {\n" in text
    assert "max_queue_size: 1" in text and "allow_timeout_override: true" in text
    assert "priority_queue_policy {\n    key: 1\n    value {\n      timeout_action: DELAY\n" in text
    report = validate_config_text(text, "repo/m/config.pbtxt")
    assert [str(p) for p in report.problems] == []


def test_queue_mistakes_are_reported_at_their_line(tmp_path: Path) -> None:
    """Out-of-range levels, unknown actions and keys, bad types: every one at its line and field."""
    path = _write(tmp_path, """
        priority_levels: 2
        default_priority_level: 3
        default_queue_policy:
          timeout_action: DROP
          max_queue_size: -1
          max_queue_siz: 1
        priority_queue_policy:
          5: {max_queue_size: 2}
          1: {default_timeout_microseconds: soon}
    """)
    where = "models[0].dynamic_batching"
    assert refused(path) == [
        f"deploy.yaml:8:31 {where}.default_priority_level: must be in range [1, 2] "
        "(Triton: default priority level must be in range [1, priority_levels])",
        f"deploy.yaml:10:25 {where}.default_queue_policy.timeout_action: unknown action 'DROP'; "
        "choose one of REJECT, DELAY",
        f"deploy.yaml:11:25 {where}.default_queue_policy.max_queue_size: must be >= 0",
        f"deploy.yaml:12:9 {where}.default_queue_policy.max_queue_siz: unknown key 'max_queue_siz'; "
        "did you mean 'max_queue_size'?",
        f"deploy.yaml:14:9 {where}.priority_queue_policy.5: "
        "priority level must be an integer in range [1, 2]",
        f"deploy.yaml:15:43 {where}.priority_queue_policy.1.default_timeout_microseconds: "
        "must be an integer, not string 'soon'",
    ]


def test_settings_triton_would_ignore_are_refused(tmp_path: Path) -> None:
    """A per-level policy without priority levels, an override with no default timeout: refused in a spec."""
    path = _write(tmp_path, """
        priority_queue_policy:
          1: {max_queue_size: 2}
        default_queue_policy: {allow_timeout_override: true}
    """)
    where = "models[0].dynamic_batching"
    assert refused(path) == [
        f"deploy.yaml:7:7 {where}.priority_queue_policy: needs priority_levels "
        "(Triton ignores it with a single queue)",
        f"deploy.yaml:9:54 {where}.default_queue_policy.allow_timeout_override: has no effect without "
        "default_timeout_microseconds: Triton applies a request's timeout only when it is shorter than "
        "the default",
    ]


def test_validate_warns_where_triton_loads_but_ignores() -> None:
    """In a hand-written config.pbtxt the same settings are warnings: Triton loads them and ignores them."""
    text = (
        'name: "m"\nbackend: "python"\nmax_batch_size: 4\ndynamic_batching {\n'
        "  default_priority_level: 1\n"
        "  default_queue_policy { allow_timeout_override: true }\n"
        "  priority_queue_policy { key: 1 value { max_queue_size: 2 } }\n}\n"
    )
    report = validate_config_text(text, "repo/m/config.pbtxt")
    assert [(p.severity, p.line, p.field) for p in report.problems] == [
        ("warning", 7, "dynamic_batching.priority_queue_policy"),
        ("warning", 5, "dynamic_batching.default_priority_level"),
        ("warning", 6, "dynamic_batching.default_queue_policy.allow_timeout_override"),
    ]
