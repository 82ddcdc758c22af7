"""`ge-console openai`: an OpenAI-compatible front door over a session's generate models, in the
foreground (the work is in frontdoor.serve, imported when the verb runs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from triton_ge_console.arg_types import port_number


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add `openai`."""
    parser = subparsers.add_parser(
        "openai", help="serve a session's generate models as an OpenAI-compatible API (/v1/completions, "
                       "/v1/chat/completions, /v1/models), in the foreground")
    parser.add_argument("--session", "-s", default=None, help="the session (default: the only one running)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; another needs a token-locked session)")
    parser.add_argument("--port", type=port_number, default=None, help="port (default: a free one)")
    parser.add_argument("--chat-template", type=Path, metavar="FILE", default=None,
                        help="a Jinja chat template for every model (default: each tokenizer's "
                             "tokenizer_config.json chat_template, else 'role: content' lines)")
    parser.set_defaults(func=run_openai)


def run_openai(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C; the base URL printed first."""
    from triton_ge_console.sessions.frontdoor.chat_template import template_for
    from triton_ge_console.sessions.frontdoor.serve import plan_door, serve_door
    from triton_ge_console.sessions.server.registry import Registry

    if args.chat_template is not None:  # a broken one is refused now, not at the first chat request
        template_for(None, args.chat_template).compile()
    plan = plan_door(Registry().resolve(args.session, running=True), args.host, args.port, args.chat_template)
    locked = " (clients send Authorization: Bearer <the session's token>)" if plan.token else ""
    print(f"OpenAI API for session {plan.session} at {plan.url}{locked}; Ctrl-C stops it", flush=True)
    serve_door(plan)
    return 0
