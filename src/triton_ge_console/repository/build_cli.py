"""`ge-console init` and `ge-console build`: a starter spec, and a spec turned into a model repository."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from triton_ge_console.arg_types import error_line
from triton_ge_console.display import listed, printable

# Imported where used: building the parser for `--help` must not load onnx, protobuf or clients.

DEFAULT_SPEC_NAME = "deploy.yaml"


def register(subparsers: Any) -> None:
    """Add `init` and `build` to the CLI."""
    init = subparsers.add_parser(
        "init",
        help="write a commented starter deployment spec",
        description="Write a commented starter deployment spec (the seed deployment: "
        "llama_model and bert_model from built-in demo models).",
    )
    init.add_argument(
        "path", type=Path, metavar="PATH", help=f"file to write (a folder gets {DEFAULT_SPEC_NAME} inside it)"
    )
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.set_defaults(func=run_init)
    build = subparsers.add_parser(
        "build",
        help="build a Triton model repository from a deployment spec",
        description="Build REPO from SPEC atomically; unchanged models are not "
        "touched. Prints added / updated / unchanged / removed per model.",
    )
    build.add_argument("spec", type=Path, metavar="SPEC", help="deployment spec (YAML)")
    build.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        metavar="REPO",
        help="model repository folder to create or update",
    )
    build.add_argument("--json", action="store_true", help="print the change report as JSON")
    build.add_argument(
        "--copy",
        action="store_true",
        help="copy model files instead of hard-linking them (a linked file shares its bytes with the "
        "source: overwrite a source in place and the repository's copy changes too)",
    )
    build.add_argument(
        "--force",
        action="store_true",
        help="replace a model folder of the spec's name that no build made (one not listed in REPO's "
        ".ge-console-build.json): without it the build refuses and leaves it as it is",
    )
    build.set_defaults(func=run_build)


def run_init(args: argparse.Namespace) -> int:
    """Write the starter spec; exit 1 if the file exists (without --force) or cannot be written."""
    from triton_ge_console.repository.starter import write_starter

    path: Path = args.path
    if path.is_dir():
        path = path / DEFAULT_SPEC_NAME
    try:
        write_starter(path, force=args.force)
    except FileExistsError as exc:
        return error_line(str(exc))
    except OSError as exc:
        return error_line(f"cannot write {path}: {exc.strerror or exc}")
    print(f"wrote {path}; build it with: ge-console build {path} -o repo")
    return 0


def run_build(args: argparse.Namespace) -> int:
    """Load the spec and build the repository; every problem goes to stderr, one line each."""
    from triton_ge_console.repository.build import BuildError, build_repository
    from triton_ge_console.repository.progress import TerminalProgress
    from triton_ge_console.repository.spec.load import SpecError, load_spec

    progress = TerminalProgress()
    try:
        spec = load_spec(args.spec)
        report = build_repository(spec, args.output, link=not args.copy, progress=progress, force=args.force)
    except SpecError as exc:
        return _fail(args, [str(p) for p in exc.problems], [p.to_dict() for p in exc.problems])
    except BuildError as exc:
        return _fail(args, [str(exc)], [{"message": str(exc)}])
    finally:
        progress.close()
    for model in spec.models:
        for note in model.notes:
            print(printable(f"ge-console build: note: model {model.name}: {note}"), file=sys.stderr)
    if args.json:
        print(json.dumps({"ok": True, **report.to_dict()}, indent=2))
    else:
        print("\n".join(report.lines()))
    return 0


def _fail(args: argparse.Namespace, lines: list[str], problems: list[dict[str, Any]]) -> int:
    """Report a failed build (stderr lines; with --json also a JSON object on stdout)."""
    for line in listed(lines):
        error_line(line)
    if len(lines) > 1:
        error_line(f"{len(lines)} problems in {args.spec}; nothing was written")
    if args.json:
        print(json.dumps({"ok": False, "problems": problems}, indent=2))
    return 1
