"""Reach pods from outside the cluster: each pod's http, grpc and metrics ports listen on 127.0.0.1 free
ports, and every connection accepted there is relayed over a port-forward through the API server.

The `kubernetes` client's port-forward (websocket, v4.channel.k8s.io) carries one stream per port on a
websocket, so each accepted connection gets its own port-forward: concurrent connections (the poller's
health, index and metrics requests, a gRPC channel) never share a stream. The client's forward closes as
a whole when either side stops sending, so a connection is relayed until one side closes it (no half-close,
which HTTP and gRPC clients do not use).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, NamedTuple

from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.stream import portforward

from triton_ge_console.errors import GeConsoleError
from triton_ge_console.fleet.k8s_discovery import PodMember

LOCAL_HOST = "127.0.0.1"
CHUNK = 64 * 1024
RELEASE_S = 5.0  # how long a port-forward's proxy gets to close after its connection ended
OPEN_TIMEOUT_S = 10.0  # how long opening a port-forward may take (the client sets no limit)
RETRY_FIRST_S, RETRY_CAP_S = 5.0, 60.0  # a refused pod is asked again after 5 s, then 10, 20 ... 60 s
HTTP_FORBIDDEN, HTTP_NOT_FOUND = 403, 404
Say = Callable[[str], None]


class ForwardRefused(GeConsoleError, RuntimeError):
    """The API server did not open a port-forward; one line saying which pod and why."""


def refusal(namespace: str, pod: str, exc: ApiException) -> str:
    """One line for a refused port-forward (the client raises it while handling the handshake's error,
    which stays the exception's context, with the HTTP status)."""
    status = getattr(exc.__context__, "status_code", None)
    where = f"pod {namespace}/{pod}"
    if status == HTTP_FORBIDDEN:
        return (f"{where}: the API server refused the port-forward (403 Forbidden): "
                f"RBAC must allow 'create' on pods/portforward in namespace {namespace}")
    if status == HTTP_NOT_FOUND:
        return f"{where}: port-forward failed: the pod is gone (404 Not Found)"
    reason = f"{status} from the API server" if status else str(exc.reason).split(" -+-+- ")[0]
    return f"{where}: port-forward failed: {reason}"


class _Relay:
    """One accepted connection and its port-forward, copying both ways until either side ends."""

    def __init__(self, local: socket.socket, forward: Any, port: int) -> None:
        self.local, self.forward, self.port = local, forward, port
        self.remote = forward.socket(port)

    def run(self) -> None:
        """Copy until one side closes, then close both (the port-forward's websocket after them)."""
        with selectors.DefaultSelector() as selector:
            selector.register(self.local, selectors.EVENT_READ, self.remote)
            selector.register(self.remote, selectors.EVENT_READ, self.local)
            try:
                while self._step(selector):
                    pass
            except OSError:
                pass
            finally:
                self.local.close()
                self._release()

    def _release(self) -> None:
        """Let the client's proxy end the port-forward itself: told by our end's EOF, it closes its end and
        the websocket. What it still delivers meanwhile is read and dropped; closing our end under it
        instead kills its thread (EPIPE, ECONNRESET) and leaves the websocket open."""
        with contextlib.suppress(OSError):
            self.remote.shutdown(socket.SHUT_WR)
            self.remote.settimeout(RELEASE_S)
            while self.remote.recv(CHUNK):
                pass
        self.remote.close()

    @staticmethod
    def _step(selector: selectors.BaseSelector) -> bool:
        """Move what is readable now; False once a side has ended."""
        for key, _ in selector.select():
            data = key.fileobj.recv(CHUNK)  # type: ignore[union-attr]  # both are sockets
            if not data:
                return False
            key.data.sendall(data)
        return True

    def close(self) -> None:
        """End the relay from another thread (shutting the local end wakes its select; run() ends it)."""
        with contextlib.suppress(OSError):
            self.local.shutdown(socket.SHUT_RDWR)

    def error(self) -> str | None:
        """What the kubelet said on the port's error channel, if anything."""
        text = self.forward.error(self.port)
        return str(text) if text else None


def open_forward(configuration: client.Configuration, namespace: str, pod: str, port: int) -> Any:
    """A port-forward of one pod port, on its own ApiClient: the client's `portforward` swaps its ApiClient's
    `call_api` while connecting, so forwards opening at once (and the follower's watch) must not share one."""
    api = client.ApiClient(configuration)
    try:
        core = client.CoreV1Api(api)
        return portforward(core.connect_get_namespaced_pod_portforward, pod, namespace, ports=str(port))
    except ApiException as exc:
        raise ForwardRefused(refusal(namespace, pod, exc)) from None
    finally:
        api.close()


def open_within(configuration: client.Configuration, namespace: str, pod: str, port: int,
                timeout_s: float) -> Any:
    """open_forward with a deadline: the client's websocket connect takes no timeout, so an API server that
    accepts the connection and never answers would hold the caller (and a poll's connection) forever. A
    forward that opens after the deadline is closed as it arrives."""
    opened: Future[Any] = Future()

    def opening() -> None:
        try:
            opened.set_result(open_forward(configuration, namespace, pod, port))
        except BaseException as exc:  # handed to the waiting caller, whatever it is
            opened.set_exception(exc)

    threading.Thread(target=opening, daemon=True, name=f"port-forward open {pod}:{port}").start()
    try:
        return opened.result(timeout_s)
    except FutureTimeout:
        opened.add_done_callback(_close_late)
        raise ForwardRefused(f"pod {namespace}/{pod}: the API server did not open a port-forward to port "
                             f"{port} within {timeout_s:g} s") from None


def _close_late(opened: Future[Any]) -> None:
    """Close a port-forward that opened after its caller stopped waiting."""
    if opened.exception() is None:
        opened.result().close()


class PodForward:
    """A pod's ports listening on 127.0.0.1, every accepted connection relayed to the pod, until close()."""

    def __init__(self, member: PodMember, namespace: str, configuration: client.Configuration,
                 say: Say, open_timeout_s: float = OPEN_TIMEOUT_S) -> None:
        self.pod, self.namespace, self.remote_ports = member.pod, namespace, member.ports
        self._configuration, self._say, self._open_timeout_s = configuration, say, open_timeout_s
        self._listeners = {socket.create_server((LOCAL_HOST, 0)): port for _, port in member.ports}
        pairs = zip(member.ports, self._listeners, strict=True)
        local = tuple((kind, listener.getsockname()[1]) for (kind, _), listener in pairs)
        self.local = PodMember(member.pod, LOCAL_HOST, local)
        self._relays: set[_Relay] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._last_error: str | None = None
        self._wake, self._waker = socket.socketpair()
        self._thread = threading.Thread(target=self._accept, daemon=True, name=f"port-forward {self.pod}")
        self._thread.start()

    def _accept(self) -> None:
        """Take connections on every listener until close() wakes it."""
        with selectors.DefaultSelector() as selector:
            selector.register(self._wake, selectors.EVENT_READ, None)
            for listener, port in self._listeners.items():
                selector.register(listener, selectors.EVENT_READ, port)
            while True:
                for key, _ in selector.select():
                    if key.data is None:
                        return
                    conn, _ = key.fileobj.accept()  # type: ignore[union-attr]  # listeners
                    threading.Thread(target=self._serve, args=(conn, key.data), daemon=True).start()

    def _serve(self, conn: socket.socket, port: int) -> None:
        """Relay one connection over a port-forward of its own; say (once) why one could not be opened."""
        try:
            forward = open_within(self._configuration, self.namespace, self.pod, port, self._open_timeout_s)
            relay = _Relay(conn, forward, port)
        except ForwardRefused as exc:
            conn.close()
            self._report(str(exc))
            return
        with self._lock:
            if self._closed:
                relay.close()
            self._relays.add(relay)
        relay.run()
        with self._lock:
            self._relays.discard(relay)
        error = relay.error()
        if error:
            self._report(f"pod {self.namespace}/{self.pod}: port {port}: {error}")
        else:
            with self._lock:
                self._last_error = None  # working again: a new failure is news

    def _report(self, line: str) -> None:
        """A warning, unless it repeats the last one (every poll would say it again)."""
        with self._lock:
            repeated, self._last_error = line == self._last_error, line
        if not repeated:
            self._say(f"warning: {line}")

    def close(self) -> None:
        """Stop listening and end every relay (their port-forwards close with them)."""
        with self._lock:
            self._closed = True
            relays = list(self._relays)
        self._waker.send(b"x")
        self._thread.join(5)
        for sock in (*self._listeners, self._wake, self._waker):
            sock.close()
        for relay in relays:
            relay.close()


class _Refused(NamedTuple):
    """A pod whose port-forward was refused: when to ask again, the pause before that, and what was said."""

    at: float
    pause: float
    reason: str


class PortForwards:
    """The forwards of a target's members: opened as pods join, closed as they leave or when attach stops.
    A pod the API server would not forward to (refused, or no answer within the deadline) is asked again
    in the background, 5 s after and then at doubling pauses up to a minute, while it is a member: a
    transient refusal must not leave a serving pod unwatched until the pod set next changes."""

    def __init__(self, namespace: str, configuration: client.Configuration, say: Say,
                 publish: Callable[[dict[str, PodMember]], None] | None = None,
                 open_timeout_s: float = OPEN_TIMEOUT_S, retry_s: float = RETRY_FIRST_S) -> None:
        self.namespace, self._configuration, self._say = namespace, configuration, say
        self._publish, self._open_timeout_s, self._retry_s = publish, open_timeout_s, retry_s
        self.forwards: dict[str, PodForward] = {}
        self._wanted: dict[str, PodMember] = {}
        self._waiting: dict[str, _Refused] = {}
        self._lock = threading.RLock()  # the follower's thread and the retrying thread
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._retry_loop, daemon=True, name="port-forward retries")
        self._thread.start()

    def __call__(self, members: dict[str, PodMember]) -> None:
        """The follower's callback: `update`, the result going to `publish`."""
        self.update(members)

    def update(self, members: dict[str, PodMember]) -> dict[str, PodMember]:
        """Forward the pods that joined, close those that left; returns (and publishes) the members at their
        local ports."""
        with self._lock:
            self._wanted = dict(members)
            self._waiting = {pod: refused for pod, refused in self._waiting.items() if pod in members}
            for pod in sorted(self.forwards.keys() - members.keys()):
                self.forwards.pop(pod).close()
            for pod, member in sorted(members.items()):
                current = self.forwards.get(pod)
                if current is not None and current.remote_ports != member.ports:
                    self.forwards.pop(pod).close()
                if pod not in self.forwards and pod not in self._waiting:
                    self._start(member)
            return self._published()

    def _published(self) -> dict[str, PodMember]:
        """The members at their local ports, handed to `publish` (under the lock, so in order)."""
        local = {pod: forward.local for pod, forward in self.forwards.items()}
        if self._publish is not None:
            self._publish(dict(local))
        return local

    def _start(self, member: PodMember) -> bool:
        """Forward to the pod if the API server lets us; whether it was added."""
        return self._admit(member, self._refusal(member))

    def _refusal(self, member: PodMember) -> str | None:
        """Why the API server would not open a port-forward to the pod (RBAC, no answer in time), or None;
        it can take the whole deadline, so the retry thread asks with no lock held (`update` asks about
        joining pods under it: the follower waits for its answer in any case)."""
        try:
            open_within(self._configuration, self.namespace, member.pod, member.ports[0][1],
                        self._open_timeout_s).close()
        except ForwardRefused as exc:
            return str(exc)
        return None

    def _admit(self, member: PodMember, refusal: str | None) -> bool:
        """Listen for the pod's ports, or note the refusal (said once per reason) to ask again later."""
        if refusal is not None:
            before = self._waiting.get(member.pod)
            if before is None or before.reason != refusal:
                self._say(f"warning: {refusal}; not added for now (asked again, at most a minute apart)")
            pause = self._retry_s if before is None else min(RETRY_CAP_S, before.pause * 2)
            self._waiting[member.pod] = _Refused(time.monotonic() + pause, pause, refusal)
            self._wake.set()
            return False
        self._waiting.pop(member.pod, None)
        forward = PodForward(member, self.namespace, self._configuration, self._say, self._open_timeout_s)
        self.forwards[member.pod] = forward
        pairs = zip(forward.local.ports, member.ports, strict=True)
        routes = ", ".join(f"{kind} {LOCAL_HOST}:{local} -> {remote}" for (kind, local), (_, remote) in pairs)
        self._say(f"forwarding pod {member.pod}: {routes}")
        return True

    def _retry_loop(self) -> None:
        """Ask again about the pods whose forward was refused, each when its pause is over; the asking is
        done outside the lock, so a slow answer holds up no member change and no close."""
        while True:
            self._wake.clear()  # before looking: a pod refused from now on wakes the wait below
            with self._lock:
                if self._closed:
                    return
                now = time.monotonic()
                due = [(pod, self._wanted[pod]) for pod, refused in sorted(self._waiting.items())
                       if refused.at <= now and pod in self._wanted]
            answers = []
            for pod, member in due:
                if self._closed:  # close() does not wait for the rest of the round
                    return
                answers.append((pod, member, self._refusal(member)))
            with self._lock:
                if self._closed:
                    return
                added = [pod for pod, member, refusal in answers  # still wanted as asked, not forwarded
                         if pod in self._waiting and self._wanted.get(pod) == member
                         and self._admit(member, refusal)]
                if added:
                    self._published()
                next_at = min((refused.at for refused in self._waiting.values()), default=None)
            self._wake.wait(None if next_at is None else max(0.0, next_at - time.monotonic()))

    def close(self) -> None:
        """Close every forward and stop asking again."""
        with self._lock:
            self._closed = True
            self._waiting.clear()
            for pod in sorted(self.forwards):
                self.forwards.pop(pod).close()
        self._wake.set()
        self._thread.join(5)
