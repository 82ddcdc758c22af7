"""The answer to `GET .../pods/NAME/portforward` with a websocket upgrade, for the stand-in API server in
`k8s_api`: each forwarded port is relayed to a real server on 127.0.0.1, as the kubelet relays it to the
pod's port. Every behaviour is the cited source's:

- authorization comes before the upgrade: a refused user gets 403 and a `Status` whose message is
  `pods "NAME" is forbidden: User "U" cannot create resource "pods/portforward" in API group "" in the
  namespace "NS"` (k8s.io/apiserver pkg/endpoints/handlers/responsewriters/errors.go `forbiddenMessage`,
  wrapped by apimachinery `errors.NewForbidden`; websocket upgrades need `create` since
  kubernetes/kubernetes#134577); then the API server looks the pod up, so one that does not exist gets
  404 `pods "NAME" not found` (`errors.NewNotFound`), and passes the upgrade through to the kubelet
  (kubernetes pkg/registry/core/pod/rest/subresources.go `PortForwardREST.Connect`: `PortForwardLocation`,
  then an `UpgradeAwareProxyHandler` with upgrade required).
- the upgrade is RFC 6455 §4.2.2 (Sec-WebSocket-Accept = base64(SHA-1(key + the §1.3 GUID))); the
  subprotocol is the first of the client's list the server supports (apiserver pkg/util/wsstream/conn.go
  `handshake`), for port-forward "", "v4.channel.k8s.io" and "v4.base64.channel.k8s.io"
  (kubernetes pkg/kubelet/cri/streaming/portforward/websocket.go `handleWebSocketStreams`).
- the ports come from the `ports` query, comma-separated (websocket.go `NewV4Options`); port i has a
  read/write data channel 2*i and a write-only error channel 2*i+1, and the first message on each carries
  the port as a little-endian uint16 (websocket.go).
- each message is one binary frame: the channel byte, then the data (conn.go `write`); from the client,
  empty messages are skipped and channels out of range ignored, data for a write-only channel dropped
  (conn.go `handle`, `DataFromSocket`).
- per port the runtime dials the port and copies both ways; when one direction ends it waits up to 1 s
  for the other, then the stream closes (containerd internal/cri/server/sandbox_portforward_linux.go
  `portForward`); a failed dial writes "error forwarding port P to pod NAME, uid UID: ERR" on the error
  channel (websocket.go `portForward`). Once every port is done the connection closes (websocket.go
  `run` waits for all, then `conn.Close()`), with a close frame (golang.org/x/net/websocket `Conn.Close`).
- a ping gets its pong, a close frame is answered with one and ends the connection (RFC 6455 §5.5).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler
from typing import BinaryIO

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PROTOCOL = "v4.channel.k8s.io"
SUPPORTED = ("", PROTOCOL, "v4.base64.channel.k8s.io")
OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x2, 0x8, 0x9, 0xA
USER = "viewer"  # the kubeconfig's user
UID = "0f5c3a8e-2d7b-4c1e-9a64-7b8d2e5f1c30"


def status(handler: BaseHTTPRequestHandler, code: int, reason: str, message: str, pod: str) -> None:
    """A `Status` failure, as the API server sends one."""
    body = json.dumps({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
        "reason": reason, "details": {"name": pod, "kind": "pods"}, "code": code,
    }).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def refuse(handler: BaseHTTPRequestHandler, namespace: str, pod: str, forbidden: bool) -> None:
    """403 for a user without the permission, 404 for a pod that is not there."""
    if forbidden:
        status(handler, 403, "Forbidden", f'pods "{pod}" is forbidden: User "{USER}" cannot create resource '
               f'"pods/portforward" in API group "" in the namespace "{namespace}"', pod)
    else:
        status(handler, 404, "NotFound", f'pods "{pod}" not found', pod)


def upgrade(handler: BaseHTTPRequestHandler) -> str | None:
    """Switch to the websocket protocol; returns the subprotocol chosen (None: not answered)."""
    header = handler.headers.get("Sec-WebSocket-Protocol") or ""
    offered = [p.strip() for p in header.split(",") if p.strip()] or [""]  # none offered: ""
    chosen = next((p for p in offered if p in SUPPORTED), None)
    if chosen != PROTOCOL:  # the stand-in speaks only the binary v4 protocol the client asks for
        handler.send_error(400, f"the stand-in speaks only {PROTOCOL}, offered {offered}")
        return None
    key = handler.headers.get("Sec-WebSocket-Key", "")
    accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    handler.send_response(101)
    for name, value in (("Upgrade", "websocket"), ("Connection", "Upgrade"),
                        ("Sec-WebSocket-Accept", accept), ("Sec-WebSocket-Protocol", chosen)):
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.flush()
    return chosen


def frame(opcode: int, data: bytes) -> bytes:
    """One unmasked, final server frame (RFC 6455 §5.2)."""
    n = len(data)
    head = bytes([n]) if n < 126 else bytes([126]) + n.to_bytes(2, "big") if n < 65536 \
        else bytes([127]) + n.to_bytes(8, "big")
    return bytes([0x80 | opcode]) + head + data


def read_frame(rfile: BinaryIO) -> tuple[int, bytes]:
    """One client frame, unmasked (RFC 6455 §5.2, §5.3: a client masks every frame)."""
    first, second = _exact(rfile, 2)
    assert first & 0x80, "the client sends whole messages (websocket-client ABNF.create_frame: fin=1)"
    length = second & 0x7F
    if length >= 126:
        length = int.from_bytes(_exact(rfile, 2 if length == 126 else 8), "big")
    key = _exact(rfile, 4) if second & 0x80 else b"\0\0\0\0"
    data = _exact(rfile, length)
    mask = (key * (length // 4 + 1))[:length]
    unmasked = (int.from_bytes(data, "big") ^ int.from_bytes(mask, "big")).to_bytes(length, "big")
    return first & 0x0F, unmasked


def _exact(rfile: BinaryIO, n: int) -> bytes:
    """n bytes, or EOFError."""
    data = rfile.read(n) if n else b""
    if len(data) < n:
        raise EOFError
    return data


class ForwardSession:
    """One upgraded port-forward connection: the pod's ports relayed to 127.0.0.1 upstream ports."""

    def __init__(self, handler: BaseHTTPRequestHandler, pod: str, ports: list[int],
                 upstream: dict[int, int]) -> None:
        self.handler, self.pod, self.ports, self.upstream = handler, pod, ports, upstream
        self._send_lock = threading.Lock()
        self.client_gone = threading.Event()  # the client closed (or lost) the websocket
        self.conns: dict[int, socket.socket | None] = {}
        self._left = len(ports)
        self._left_lock = threading.Lock()

    def send(self, opcode: int, data: bytes) -> None:
        """One frame to the client (writers on several threads)."""
        with self._send_lock:
            self.handler.connection.sendall(frame(opcode, data))

    def run(self) -> None:
        """Announce each port on its two channels, start its relay, then read the client until it closes."""
        for i, port in enumerate(self.ports):
            for channel in (2 * i, 2 * i + 1):
                self.send(OP_BINARY, bytes([channel]) + port.to_bytes(2, "little"))
        for i, port in enumerate(self.ports):
            self.conns[i] = self._dial(i, port)
        try:
            self._read_client()
        except (EOFError, OSError):
            pass
        finally:
            self.client_gone.set()
            for conn in self.conns.values():
                if conn is not None:
                    conn.close()

    def _dial(self, i: int, port: int) -> socket.socket | None:
        """Connect port i's stream to its upstream; on failure say why on its error channel."""
        try:
            conn = socket.create_connection(("127.0.0.1", self.upstream.get(port, 1)), timeout=5)
        except OSError as exc:
            error = f"error forwarding port {port} to pod {self.pod}, uid {UID}: {exc}"
            self.send(OP_BINARY, bytes([2 * i + 1]) + error.encode())
            self._port_done()
            return None
        conn.settimeout(None)
        threading.Thread(target=self._upstream_to_client, args=(i, conn), daemon=True).start()
        return conn

    def _upstream_to_client(self, i: int, conn: socket.socket) -> None:
        """Copy the upstream's bytes to data channel 2*i; when it ends, give the other way 1 s."""
        try:
            while data := conn.recv(65536):
                self.send(OP_BINARY, bytes([2 * i]) + data)
        except OSError:
            pass
        self.client_gone.wait(1.0)
        self._port_done()

    def _port_done(self) -> None:
        """When every port's forward ended, the connection closes (close frame, then the socket)."""
        with self._left_lock:
            self._left -= 1
            last = self._left == 0
        if last and not self.client_gone.is_set():
            with contextlib.suppress(OSError):
                self.send(OP_CLOSE, (1000).to_bytes(2, "big"))
                self.handler.connection.shutdown(socket.SHUT_RDWR)

    def _read_client(self) -> None:
        """Client frames: channel 2*i data goes upstream; close ends the session; ping gets its pong."""
        while True:
            opcode, data = read_frame(self.handler.rfile)  # type: ignore[arg-type]
            if opcode == OP_CLOSE:
                with contextlib.suppress(OSError):
                    self.send(OP_CLOSE, data[:2])
                return
            if opcode == OP_PING:
                self.send(OP_PONG, data)
            if opcode != OP_BINARY or not data or data[0] >= 2 * len(self.ports) or data[0] % 2:
                continue
            conn = self.conns.get(data[0] // 2)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.sendall(data[1:])

