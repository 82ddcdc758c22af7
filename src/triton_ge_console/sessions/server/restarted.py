"""A server its supervisor restarted after a crash: the session's record follows it, and is ready again
only once every model the session loads is READY (asked of the server, with the session's token)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from triton_ge_console.session_states import READY, STARTING, STOPPED
from triton_ge_console.sessions.server.registry import (
    Registry,
    RegistryError,
    SessionNotFound,
    SessionRecord,
    process_create_time,
    process_start_ticks,
    resolve_token,
)
from triton_ge_console.triton_terms import MODEL_READY

SERVING_TIMEOUT_S = 600.0  # a restart whose models load longer than this is left starting
POLL_S = 0.2


def follow_restart(session: str, server: subprocess.Popen[bytes], serving: Callable[[str], None]) -> None:
    """Point the session's record at the restarted server (starting); a thread marks it ready once its
    models are, and tells `serving`."""
    record = _update(session, lambda r: r.replace(
        pid=server.pid, pid_start_ticks=process_start_ticks(server.pid),
        pid_create_time=process_create_time(server.pid), state=STARTING, exit_code=None))
    if record is None:
        return
    thread = threading.Thread(target=_wait_serving, args=(record, server, serving), daemon=True)
    thread.start()


def _wait_serving(record: SessionRecord, server: subprocess.Popen[bytes],
                  serving: Callable[[str], None]) -> None:
    """Wait until the restarted server serves every session model, then record it ready."""
    started = time.monotonic()
    token = resolve_token(record.token_ref)
    while server.poll() is None and time.monotonic() - started < SERVING_TIMEOUT_S:
        if models_ready(record, token):
            if _following(record.name, server.pid):  # said first: a reader who sees it ready finds it said
                serving(f"server serves again after {time.monotonic() - started:.1f}s "
                        f"({', '.join(record.models) or 'no models'} READY)")
                _update(record.name, lambda r: r.replace(state=READY) if r.pid == server.pid else r)
            return
        time.sleep(POLL_S)


def models_ready(record: SessionRecord, token: str | None) -> bool:
    """Whether the server's repository index has every session model READY."""
    request = urllib.request.Request(f"{record.http_url}/v2/repository/index", data=b"{}", method="POST")
    if token:
        request.add_header(record.token_header, token)
    try:
        with urllib.request.urlopen(request, timeout=2.0) as response:
            index = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return False
    ready = {entry.get("name") for entry in index
             if isinstance(entry, dict) and entry.get("state") == MODEL_READY}
    return all(model in ready for model in record.models)


def _following(session: str, pid: int) -> bool:
    """Whether the session's record still follows the server pid (not stopped, forgotten or restarted)."""
    with contextlib.suppress(SessionNotFound, RegistryError, OSError):
        record = Registry().load(session)
        return record.pid == pid and record.state != STOPPED and record.stop_requested_at is None
    return False


def _update(session: str, change: Callable[[SessionRecord], SessionRecord]) -> SessionRecord | None:
    """Change the session's record unless it was stopped or forgotten meanwhile; the new record, or None."""
    registry = Registry()
    with contextlib.suppress(SessionNotFound, RegistryError, OSError):
        record = registry.load(session)
        if record.state == STOPPED or record.stop_requested_at is not None:
            return None
        changed = change(record)
        registry.save(changed)
        return changed
    return None
