"""Load, unload and reload models through tritonclient, verifying what Triton actually did.

Every answer is a `CommandResult` checked against the repository index (and the model config for
overrides); on failure its message is Triton's own, never a traceback. A session's controller
(`controller_for`: its token, log and loaded digests) is a `SessionControl`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triton_ge_console.display import printable
from triton_ge_console.errors import GeConsoleError, InputError
from triton_ge_console.sessions.act.digests import model_digest, store_digests
from triton_ge_console.sessions.observe.health import InstanceWatch, instance_watch, leaked_in_words
from triton_ge_console.sessions.observe.source import CommandResult
from triton_ge_console.sessions.server.access import SessionReach, explain, refusal, session_reach
from triton_ge_console.sessions.server.registry import SessionRecord
from triton_ge_console.sessions.server.server_log import LogTail, log_size
from triton_ge_console.sessions.server.token_header import TOKEN_HEADER
from triton_ge_console.triton_terms import (
    MODEL_READY,
    MODEL_UNKNOWN,
    MODEL_UNLOADING,
    RELOAD_PARAMETER,
    parse_endpoint,
)

if TYPE_CHECKING:
    import tritonclient.http as triton_http
    from tritonclient.utils import InferenceServerException

CLOSED_MIDWAY = "the server closed the connection (stopped or restarted meanwhile?)"
MAX_FIELDS_SHOWN = 4  # config changes named in a message; the rest are counted
DEAD_UNLOAD_WAIT_S = 5.0  # how long unload waits for a model whose instance died before saying so
LEAK_GRACE_S = 5.0  # how long a reload lets the replaced instances' stubs end on their own (1-2 s when whole)
_POLL_FAILED = re.compile(r"Poll failed for model directory '(?P<model>[^']+)': (?P<why>.*?)\"?$")


class ControlError(GeConsoleError, RuntimeError):
    """The server could not be asked (unreachable, refused); the message is one line."""


class ServerUnreachable(ControlError):
    """No answer from the server at all (down, or stopped in the middle of a call)."""


class ServerNotAnswering(ServerUnreachable):
    """The server took the connection but sent no reply within the timeout (hung, or stopped by SIGSTOP)."""


class TritonRefused(Exception):
    """Triton answered a call with an error; the text is Triton's own words (`triton_message`). `_client`
    raises it for tritonclient's InferenceServerException, so only a call imports tritonclient."""


LIVE, NOT_LIVE, NO_REPLY = "live", "not live", "no reply"  # what a liveness check found


@dataclass(frozen=True)
class ModelState:
    """One model version as the repository index reports it."""

    name: str
    version: str
    state: str
    reason: str | None = None


def client_url(http_url: str) -> tuple[str, bool]:
    """host:port for tritonclient and whether to use TLS, from "http(s)://host:port" or "host:port"."""
    endpoint = parse_endpoint(http_url, "server URL", path_allowed=True)
    return endpoint.netloc, endpoint.scheme == "https"


def one_line(message: str) -> str:
    """A server message squeezed onto one line."""
    return " ".join(message.split())


def squeeze(message: str) -> str:
    """A Triton message on one line, a Python backend's "At:" stack trace left out."""
    return one_line(re.sub(r"\n\s*At:\n(?:\s+\S.*\n?)*", " ", message)).rstrip(" ;")


def triton_message(exc: InferenceServerException) -> str:
    """Triton's own words for a failed call."""
    return squeeze(exc.message() or str(exc))


def merge_config(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge a partial config over a full one (mappings merge, everything else is replaced)."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_config(merged[key], value)
        else:
            merged[key] = value
    return merged


ConfigChange = tuple[str, Any, Any]  # field path, the value `actual` has, the value `wanted` asks for


def config_changes(wanted: Any, actual: Any, path: str = "") -> list[ConfigChange]:
    """Where `actual` does not carry a value `wanted` asks for (only the keys `wanted` names); JSON's
    int64-as-string and number forms of one value are the same."""
    if isinstance(wanted, dict):
        if not isinstance(actual, dict):
            return [(path or "config", actual, wanted)]
        changes: list[ConfigChange] = []
        for key, value in wanted.items():
            changes += config_changes(value, actual.get(key), f"{path}.{key}" if path else key)
        return changes
    if isinstance(wanted, list) and isinstance(actual, list) and len(wanted) == len(actual):
        changes = []
        for index, (item, got) in enumerate(zip(wanted, actual, strict=True)):
            changes += config_changes(item, got, f"{path}[{index}]")
        return changes
    if wanted != actual and str(wanted) != str(actual):
        return [(path, actual, wanted)]
    return []


def config_differences(wanted: Any, actual: Any, path: str = "") -> list[str]:
    """Where `actual` does not carry a value `wanted` asks for, one phrase each."""
    changes = config_changes(wanted, actual, path)
    return [f"{where} is {got!r}, not {asked!r}" for where, got, asked in changes]


def parse_config(config: str | None) -> dict[str, Any] | None:
    """A JSON config override as a mapping, or a ValueError saying why it is not one."""
    if config is None:
        return None
    try:
        data = json.loads(config)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise InputError(f"config override is not JSON: {where}: {exc.msg}") from None
    if not isinstance(data, dict):
        raise InputError("config override must be a JSON object")
    return data


class TritonControl:
    """The Controller for one server reached over HTTP (launched or attached)."""

    def __init__(
        self,
        http_url: str,
        token: str | None = None,
        *,
        token_header: str = TOKEN_HEADER,
        log_path: Path | None = None,
        timeout: float = 300.0,
        instances: InstanceWatch | None = None,
    ) -> None:
        self.http_url = http_url
        self.instances = instances  # the server's instance processes, where they can be seen
        self._hostport, self._ssl = client_url(http_url)
        self._headers = {token_header: token} if token else None
        self.log_path = log_path
        self.timeout = timeout

    def _message(self, exc: TritonRefused) -> str:
        """Triton's words for a failed call; a restricted-API refusal says whether the token was refused."""
        return explain(str(exc), token_sent=self._headers is not None)

    @contextlib.contextmanager
    def _client(self) -> Iterator[triton_http.InferenceServerClient]:
        """A fresh client per call: safe from any thread; no idle connection delays the server's exit."""
        import tritonclient.http as triton_http  # with numpy and gevent, ~0.1 s: not at the console's start
        from tritonclient.utils import InferenceServerException

        client = triton_http.InferenceServerClient(
            self._hostport, ssl=self._ssl, connection_timeout=min(10.0, self.timeout),
            network_timeout=self.timeout
        )
        try:
            yield client
        except InferenceServerException as exc:
            raise TritonRefused(triton_message(exc)) from None
        except http.client.HTTPException:  # geventhttpclient's HTTPConnectionClosed: not an OSError
            raise ConnectionError(CLOSED_MIDWAY) from None
        finally:
            client.close()

    def index(self) -> list[ModelState]:
        """Every model version in the server's repository with its state; ControlError if unreachable."""
        try:
            with self._client() as client:
                entries = client.get_model_repository_index(headers=self._headers)
        except TritonRefused as exc:
            raise ControlError(f"{self.http_url}: {self._message(exc)}") from None
        except (OSError, ValueError) as exc:
            raise self._unreachable(exc) from None
        return [_model_state(entry) for entry in entries]

    def model_config(self, model: str) -> dict[str, Any]:
        """The config Triton runs the model with."""
        try:
            with self._client() as client:
                config = client.get_model_config(model, headers=self._headers)
        except TritonRefused as exc:
            raise ControlError(f"{model}: {self._message(exc)}") from None
        except OSError as exc:
            raise self._unreachable(exc) from None
        return dict(config)

    def _unreachable(self, exc: Exception) -> ServerUnreachable:
        """The error of a call the server did not answer: no reply in time is told apart from a refusal."""
        if isinstance(exc, TimeoutError):
            return ServerNotAnswering(f"{self.http_url}: not answering: no reply within {self.timeout:g} s")
        return ServerUnreachable(f"{self.http_url}: server unreachable: {one_line(str(exc))}")

    def live(self) -> bool:
        """Whether the server answers its liveness check."""
        return self.liveness() == LIVE

    def liveness(self) -> str:
        """LIVE, NOT_LIVE (refused, or not live), or NO_REPLY within the timeout (a hung server keeps its
        port: its connections are taken, never answered)."""
        try:
            with self._client() as client:
                return LIVE if client.is_server_live(headers=self._headers) else NOT_LIVE
        except TimeoutError:
            return NO_REPLY
        except (TritonRefused, OSError, ValueError):
            return NOT_LIVE

    def access_problem(self) -> str | None:
        """Why the server refuses us ("token refused" / "token required"), None when it does not."""
        try:
            with self._client() as client:
                client.get_server_metadata(headers=self._headers)
        except TritonRefused as exc:
            return refusal(str(exc), token_sent=self._headers is not None)
        except (OSError, ValueError):
            return None
        return None

    def load(self, model: str, config: str | None = None) -> CommandResult:
        """Load a model (a full JSON config replaces config.pbtxt, as Triton defines it)."""
        return self._run("load", model, lambda: self._load(model, config, "load"))

    def reload(self, model: str, config: str | None = None) -> CommandResult:
        """Reload a loaded model (a partial JSON config merges over the running one); the old one serves."""
        return self._run("reload", model, lambda: self._reload(model, config))

    def unload(self, model: str) -> CommandResult:
        """Unload a model and wait until Triton has finished unloading it."""
        return self._run("unload", model, lambda: self._unload(model))

    def _run(self, action: str, model: str, step: Any) -> CommandResult:
        """Time one command and turn expected failures into a failed CommandResult."""
        started = time.monotonic()
        try:
            ok, message = step()
        except ServerUnreachable as exc:  # the command got this far: say which one it cut short
            ok, message = False, f"{action} {model}: {one_line(str(exc))}"
        except (ControlError, ValueError) as exc:
            ok, message = False, one_line(str(exc))
        return CommandResult(action, model, ok=ok, message=message, duration_s=time.monotonic() - started)

    def _known(self, model: str) -> list[ModelState]:
        """The model's index entries, or a ControlError naming the models the server does have."""
        entries = self.index()
        mine = [entry for entry in entries if entry.name == model]
        if not mine:
            names = ", ".join(sorted({entry.name for entry in entries})) or "none"
            raise ControlError(
                f"unknown model '{printable(model)}': not in the server's repository (models: {names})")
        return mine

    def _reload(self, model: str, config: str | None) -> tuple[bool, str]:
        """Make Triton load a new instance of a loaded model; the old one serves until it is READY.

        Triton skips a load whose config and files look unchanged, and updates in place (keeping its
        instances) one whose config changed only in instance groups. So a plain request first reloads
        what changed in the repository; when neither the log shows a new instance nor (without a log)
        the running config changed, the config Triton runs *after* that request (the repository's, an
        in-place update included) is sent explicitly with any override and a fresh `RELOAD_PARAMETER`,
        which Triton loads as a new model and swaps in once READY. The message names what changed.
        """
        if not any(entry.state == MODEL_READY for entry in self._known(model)):
            return False, f"reload {model}: not loaded (use load)"
        short = self._dead_instance(model) is not None  # Triton never finishes unloading such a generation
        ok, message = self._reloaded(model, config)
        return ok, message + (self._leaked_note(model) if ok and short else "")

    def _leaked_note(self, model: str) -> str:
        """End the stubs of the replaced generation that outlive its unload; what was ended, in words."""
        if self.instances is None:
            return ""
        end = self.instances.end_leaked(model, grace_s=LEAK_GRACE_S)
        said = (f"; ended {len(end.ended)} leaked stub process(es) of the instances it replaced, which "
                f"Triton never finished unloading: {leaked_in_words(end.ended)}") if end.ended else ""
        return said + (f"; still running after SIGKILL: {leaked_in_words(end.alive)}" if end.alive else "")

    def _reloaded(self, model: str, config: str | None) -> tuple[bool, str]:
        """The reload itself (see _reload)."""
        override = parse_config(config)
        before = self.model_config(model)
        base = before
        offset = self._log_size()
        if override is None:
            ok, message = self._load(model, None, "reload")
            if not ok or new_instance_logged(self._log_since(offset), model):
                return self._verified(model, ok, message, offset, before)
            base = self.model_config(model)  # the repository's edit, if Triton applied it in place
            if offset is None and base != before:
                versions = self._ready_versions(model)
                served = self._served(model, before)
                return True, f"reload {model}: {versions} READY with the repository's new config{served}"
        full = json.dumps(merge_config(base, {**(override or {}), "parameters": reload_marker(override)}))
        ok, message = self._load(model, full, "reload", override or {})
        return self._verified(model, ok, message, offset, before)

    def _ready_versions(self, model: str) -> str:
        """"version 1" / "version 1, 2": what of the model is READY, for messages."""
        return "version " + ", ".join(e.version for e in self._known(model) if e.state == MODEL_READY)

    def _served(self, model: str, before: dict[str, Any]) -> str:
        """'; now serving field old → new ...' (or '; same config'): what the reload changed in what
        Triton runs, so a message never calls a reload done while the old config still serves unsaid."""
        fields = config_changes(without_marker(self._config_if_known(model) or {}), without_marker(before))
        return "; now serving " + changes_text(fields) if fields else "; its config is unchanged"

    def _verified(self, model: str, ok: bool, message: str, offset: int | None,
                  before: dict[str, Any]) -> tuple[bool, str]:
        """A reload's result as the server log shows it: "new instance" only when a load was logged."""
        if not ok:
            return ok, message
        versions = self._ready_versions(model)
        served = self._served(model, before)
        if offset is None:
            return True, (f"reload {model}: {versions} READY (no server log here to confirm a new instance)"
                          f"{served}")
        if not new_instance_logged(self._log_since(offset), model):
            return False, f"reload {model}: Triton answered {versions} READY; its log shows no new instance"
        return True, f"reload {model}: new instance of {versions} READY{served}"

    def _load(self, model: str, config: str | None, action: str,
              expected: dict[str, Any] | None = None) -> tuple[bool, str]:
        """Ask Triton to load, then check the index (and config) for what it really did."""
        self._known(model)
        wanted = expected if expected is not None else parse_config(config)
        log_offset = self._log_size()
        try:
            with self._client() as client:
                client.load_model(model, headers=self._headers, config=config)
        except TritonRefused as exc:
            return False, self._failure(action, model, self._message(exc), log_offset)
        except OSError as exc:
            return False, f"{action} {model}: server unreachable: {one_line(str(exc))}"
        ready = [entry for entry in self._known(model) if entry.state == MODEL_READY]
        if not ready:
            states = self._states(model)
            return False, f"{action} {model}: Triton accepted it but no version is READY ({states})"
        if wanted:
            problems = config_differences(wanted, self.model_config(model))
            if problems:
                missing = "; ".join(problems)
                return False, f"{action} {model}: loaded, but the override is not in effect: {missing}"
        versions = ", ".join(entry.version for entry in ready)
        return True, f"{action} {model}: version {versions} READY"

    def _unload(self, model: str) -> tuple[bool, str]:
        """Ask Triton to unload, then wait until no version is READY or UNLOADING (not long for a model
        whose instance died: Triton waits on it for ever)."""
        self._known(model)
        dead = self._dead_instance(model)
        try:
            with self._client() as client:
                client.unload_model(model, headers=self._headers)
        except TritonRefused as exc:
            return False, f"unload {model}: {self._message(exc)}"
        deadline = time.monotonic() + (DEAD_UNLOAD_WAIT_S if dead else self.timeout)
        while time.monotonic() < deadline:
            busy = [e for e in self._known(model) if e.state in (MODEL_READY, MODEL_UNLOADING)]
            if not busy:
                return True, f"unload {model}: unloaded"
            time.sleep(0.1)
        if dead:
            return False, (f"unload {model}: Triton cannot finish unloading it ({dead}) and takes no more "
                           f"requests for it; `ge-console reload {model}` serves it again, `down` stops "
                           "the server")
        return False, f"unload {model}: still {self._states(model)} after {self.timeout:.0f}s"

    def _dead_instance(self, model: str) -> str | None:
        """Why a READY version of the model has a dead instance process, if one has (and it can be seen)."""
        if self.instances is None:
            return None
        ready = [(e.name, e.version) for e in self._known(model) if e.state == MODEL_READY]
        return next(iter(self.instances.dead(ready, self._config_if_known).values()), None)

    def _config_if_known(self, model: str) -> dict[str, Any] | None:
        """The model's running config, None when it cannot be read now."""
        try:
            return self.model_config(model)
        except ControlError:
            return None

    def _failure(self, action: str, model: str, message: str, log_offset: int | None) -> str:
        """Triton's message, plus the log's detail when the API gave a generic one, and what still serves."""
        detail = self._log_detail(model, log_offset) if "failed to poll" in message else None
        text = f"{action} {model} failed: {message}" + (f" ({detail})" if detail else "")
        with contextlib.suppress(ControlError):
            serving = [e.version for e in self._known(model) if e.state == MODEL_READY]
            if serving:
                text += f"; Triton kept version {', '.join(serving)} serving"
        return text

    def _states(self, model: str) -> str:
        """The model's versions and states, for messages."""
        entries = self._known(model)
        return ", ".join(f"v{e.version} {e.state}" + (f" ({e.reason})" if e.reason else "") for e in entries)

    def _log_size(self) -> int | None:
        """Current size of the server log, so only lines written after a call are read."""
        return log_size(self.log_path)

    def _log_since(self, offset: int | None) -> list[str]:
        """The server log's lines written since `offset` (none without a log)."""
        return [] if offset is None else LogTail(self.log_path, backlog=1 << 24, start=offset).read_lines()

    def _log_detail(self, model: str, offset: int | None) -> str | None:
        """Why Triton could not read the model's directory, from the log lines written since `offset`."""
        for line in reversed(self._log_since(offset)):
            found = _POLL_FAILED.search(line.strip())
            if found and found.group("model") == model:
                return found.group("why").replace('\\"', '"')
        return None


def reload_marker(override: dict[str, Any] | None) -> dict[str, Any]:
    """The override's parameters plus a fresh RELOAD_PARAMETER: a config Triton cannot update in place."""
    parameters = dict((override or {}).get("parameters") or {})
    parameters[RELOAD_PARAMETER] = {"string_value": uuid.uuid4().hex}
    return parameters


def without_marker(config: dict[str, Any]) -> dict[str, Any]:
    """A config without the reload's RELOAD_PARAMETER (a fresh one each reload, not a change to report)."""
    parameters = {k: v for k, v in (config.get("parameters") or {}).items() if k != RELOAD_PARAMETER}
    return {**config, "parameters": parameters} if "parameters" in config else config


def changes_text(fields: list[ConfigChange]) -> str:
    """Config changes as 'field old → new; ...', the first MAX_FIELDS_SHOWN of them, the rest counted."""
    shown = [f"{where} {short_value(old)} → {short_value(new)}"
             for where, old, new in fields[:MAX_FIELDS_SHOWN]]
    more = f" (and {len(fields) - MAX_FIELDS_SHOWN} more)" if len(fields) > MAX_FIELDS_SHOWN else ""
    return "; ".join(shown) + more


def short_value(value: Any) -> str:
    """A config value in a few characters: JSON, cut with an ellipsis; absent reads as such."""
    text = "(none)" if value is None else json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 40 else text[:39] + "…"


def new_instance_logged(lines: list[str], model: str) -> bool:
    """Whether these server log lines show a new instance of `model` initialised: Triton logged its load
    and a backend's instance initialisation before logging the model loaded."""
    loading = False
    for line in lines:
        if f"loading: {model}:" in line:
            loading = True
        elif loading and "ModelInstanceInitialize:" in line:
            return True
        elif f"successfully loaded '{model}'" in line:
            loading = False
    return False


def _model_state(entry: dict[str, Any]) -> ModelState:
    """A repository index entry as a ModelState."""
    reason = entry.get("reason") or None
    return ModelState(str(entry.get("name", "")), str(entry.get("version", "")),
                      str(entry.get("state", MODEL_UNKNOWN)), reason)


def controller_for(record: SessionRecord, timeout: float = 300.0,
                   reach: SessionReach | None = None) -> SessionControl:
    """The controller of a session, with its token (if any), its log for error details, and its digests."""
    reach = reach or session_reach(record)
    return SessionControl(
        record,
        reach.http_url,
        reach.token,
        token_header=reach.token_header,
        log_path=reach.log_path,
        timeout=timeout,
        instances=instance_watch(reach),  # its own: commands run on other threads than the poller's
    )


class SessionControl(TritonControl):
    """A session's TritonControl that keeps `loaded-digests.json` true after a single load or reload.

    Without it, a model reloaded by `r` or `ge-console reload MODEL` would still look changed, and the
    next `reload --changed` would reload it again. Only the session's own models are recorded (a model
    loaded from outside its list stays outside `reload --changed`), the digest is taken before the
    command (an edit saved meanwhile still counts as changed), and a command with a config override is
    not recorded: Triton then runs something other than the folder. Unload leaves the digests alone, so
    `reload --changed` does not bring back a model the operator unloaded.
    """

    def __init__(self, record: SessionRecord, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.record = record

    def load(self, model: str, config: str | None = None) -> CommandResult:
        """Load, and remember the folder as loaded."""
        digest = self._digest_before(model, config)
        return self._remember(super().load(model, config), digest)

    def reload(self, model: str, config: str | None = None) -> CommandResult:
        """Reload, and remember the folder as loaded."""
        digest = self._digest_before(model, config)
        return self._remember(super().reload(model, config), digest)

    def _digest_before(self, model: str, config: str | None) -> str | None:
        """The folder's digest now, when this command's outcome should be recorded."""
        if config is not None or model not in self.record.models or self.record.repository is None:
            return None
        return model_digest(self.record.repository / model)

    def _remember(self, result: CommandResult, digest: str | None) -> CommandResult:
        """Record the digest after success; a failed write is said, never hides Triton's answer."""
        if not result.ok or digest is None:
            return result
        try:
            store_digests(self.record, {result.target: digest})
        except OSError as exc:
            note = f" (not recorded for reload --changed: {exc})"
            return dataclasses.replace(result, message=result.message + note)
        return result
