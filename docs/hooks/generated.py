"""MkDocs hook: the reference pages that must not drift are written at build time from the code itself.

`<!-- generated: cli -->` becomes every verb's `--help` (from cli.build_parser),
`<!-- generated: spec-keys -->` every key the spec reader takes, `<!-- generated: seed-spec -->`
examples/seed.yaml (and so on: GENERATORS), and a link out of docs/ (a repository file the site does not
hold) becomes the file's path in code.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!-- generated: ([\w-]+) -->")
LINK_OUT = re.compile(r"\[([^\]]+)\]\(((?:\.\./)+[^)\s#]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """Fill the generated sections and turn links out of docs/ into repository paths."""
    markdown = MARKER.sub(lambda match: GENERATORS[match.group(1)](), markdown)
    return LINK_OUT.sub(lambda match: _repository_path(match, page.file.src_path), markdown)


def _repository_path(match: re.Match[str], src_path: str) -> str:
    """A link to a repository file outside the site reads as that file's path (the site cannot serve it)."""
    target = os.path.normpath(os.path.join("docs", os.path.dirname(src_path), match.group(2)))
    text = match.group(1)
    return text if text.strip("`") == target else f"{text} (`{target}`)"


def cli_reference() -> str:
    """Every verb's help, as `ge-console VERB --help` prints it."""
    from triton_ge_console.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal: the same width on every build
    parser = build_parser()
    sections = [_help_block("ge-console", parser.format_help())]
    for name, sub in _verbs(parser):
        sections.append(_help_block(f"ge-console {name}", sub.format_help()))
    return "\n\n".join(sections)


def _verbs(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, argparse.ArgumentParser]]:
    """The parser's verbs and their sub-verbs (`k8s render`), in registration order."""
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((f"{prefix}{name}", sub))
                found.extend(_verbs(sub, f"{prefix}{name} "))
    return found


def _help_block(title: str, text: str) -> str:
    """One verb's section: a heading and its help in a plain block."""
    return f"## `{title}`\n\n```text\n{text.rstrip()}\n```"


def spec_sections() -> list[tuple[str, tuple[str, ...]]]:
    """Each spec section and the keys its reader takes (tests/test_docs.py checks none is left out)."""
    from triton_ge_console.repository.spec import generate, k8s, load, models, options, queue_policy, tensors

    return [
        ("(top level)", load.TOP_KEYS), ("server", load.SERVER_KEYS), ("server.metrics", load.METRICS_KEYS),
        ("models[]", models.MODEL_KEYS), ("models[].inputs[] / outputs[]", tensors.TENSOR_KEYS),
        ("models[].dynamic_batching", options.BATCHING_KEYS),
        ("models[].dynamic_batching.default_queue_policy / priority_queue_policy", queue_policy.POLICY_KEYS),
        ("models[].instance_group", options.INSTANCE_KEYS),
        ("models[].parameters", options.MODEL_PATH_KEYS),
        ("models[].thresholds", options.THRESHOLD_KEYS),
        ("models[].generate", generate.GENERATE_KEYS), ("kubernetes", k8s.KUBERNETES_KEYS),
        ("kubernetes.repository", k8s.REPOSITORY_KEYS), ("kubernetes.resources", k8s.RESOURCE_KEYS),
    ]


def spec_keys() -> str:
    """Every key the spec reader accepts, section by section (an unknown key is refused: did-you-mean)."""
    lines = ["| section | keys |", "|---|---|"]
    for section, keys in spec_sections():
        lines.append(f"| `{section}` | {', '.join(f'`{key}`' for key in keys)} |")
    return "\n".join(lines)


def seed_spec() -> str:
    """The seed spec, commented key by key."""
    return f"```yaml\n{(ROOT / 'examples' / 'seed.yaml').read_text(encoding='utf-8').rstrip()}\n```"


def glue_metrics() -> str:
    """The glue's metrics section of docs/backend.md, one level down (written once, shown in both places)."""
    text = (ROOT / "docs" / "backend.md").read_text(encoding="utf-8")
    section = text.split("\n## Metrics", 1)[1].split("\n## ", 1)[0]
    return "## Metrics" + section.replace("\n### ", "\n#### ").rstrip()


def acl_codes() -> str:
    """What each AscendCL / GE return code means, as the glue says it when a load fails."""
    from triton_ge_console.backend_glue.acl_codes import MEANINGS

    rows = [f"| {code} | {meaning} |" for code, meaning in sorted(MEANINGS.items())]
    return "\n".join(["| code | meaning |", "|---:|---|", *rows])


def readme() -> str:
    """The README, the site's first page (it is the quickstart): its links made relative to docs/."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.sub(r"\]\((?!https?:|#)([^)\s]+)\)", lambda match: f"]({_from_docs(match.group(1))})", text)


def _from_docs(target: str) -> str:
    """A README link's target as seen from docs/."""
    return target.removeprefix("docs/") if target.startswith("docs/") else f"../{target}"


GENERATORS = {"readme": readme, "cli": cli_reference, "spec-keys": spec_keys, "seed-spec": seed_spec,
              "glue-metrics": glue_metrics, "acl-codes": acl_codes}
