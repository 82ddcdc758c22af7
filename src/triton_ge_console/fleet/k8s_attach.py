"""`ge-console attach k8s:NAMESPACE/SELECTOR`: each ready pod becomes an attached session (at its pod
address, or at the local ports of its port-forwards), and leaves with its pod; other sessions are never
touched."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator

from triton_ge_console.arg_types import UsageError
from triton_ge_console.fleet.k8s_discovery import (
    K8sTarget,
    PodFollower,
    PodMember,
    api_client,
    in_cluster,
)
from triton_ge_console.fleet.k8s_forward import PortForwards
from triton_ge_console.session_states import READY
from triton_ge_console.sessions.server import paths
from triton_ge_console.sessions.server.registry import Registry, SessionRecord, store_token, validate_name
from triton_ge_console.sessions.server.token_header import TOKEN_HEADER

MAX_NAME = 64
POD_IP, PORT_FORWARD = "pod-ip", "port-forward"
Say = Callable[[str], None]


def session_name(prefix: str | None, pod: str) -> str:
    """`PREFIX-POD` (or the pod's name), shortened with a hash of the whole when over 64 characters."""
    name = f"{prefix}-{pod}" if prefix else pod
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}-{digest}"


class RegistryMembers:
    """Mirrors a target's members into the registry as attached sessions marked with the target."""

    def __init__(self, registry: Registry, target: K8sTarget, say: Say, prefix: str | None = None,
                 token: str | None = None, token_header: str = TOKEN_HEADER) -> None:
        self.registry = registry
        self.target = target
        self.say = say
        self.prefix = prefix
        self.token = token
        self.token_header = token_header

    def __call__(self, members: dict[str, PodMember]) -> None:
        """Add joined pods, forget departed ones (only sessions this target added)."""
        wanted = {session_name(self.prefix, m.pod): m for m in members.values()}
        records, _ = self.registry.scan()
        ours = {r.name: r for r in records if r.discovered_by == self.target.label}
        others = {r.name for r in records} - ours.keys()
        for name in sorted(ours.keys() - wanted.keys()):
            self.registry.remove(name)
            self.say(f"left: {name} (pod {ours[name].http_url.removeprefix('http://')})")
        for name, member in sorted(wanted.items()):
            if name in others:
                self.say(f"warning: pod {member.pod}: a session named '{name}' exists already; skipped")
            elif name not in ours or ours[name].http_url != f"http://{member.url('http')}":
                self.registry.save(self._record(validate_name(name), member))
                self.say(f"joined: {name} at http://{member.url('http')}")

    def _record(self, name: str, member: PodMember) -> SessionRecord:
        """An attached session for one pod."""
        workdir = paths.session_dir(name)
        return SessionRecord(
            name=name, pid=None, started_at=time.time(), http_url=f"http://{member.url('http')}",
            grpc_url=member.url("grpc"),
            metrics_url=f"http://{member.url('metrics')}/metrics" if member.serves("metrics") else None,
            repository=None, spec=None, backend_dir=None, log_path=None,
            token_ref=store_token(workdir, self.token) if self.token else None,
            attached=True, session_dir=workdir, state=READY, token_header=self.token_header,
            discovered_by=self.target.label,
        )


def run_k8s_attach(args: argparse.Namespace, token: str | None) -> int:
    """List (--once) or follow the target's pods until interrupted."""
    target = K8sTarget.parse(args.url)
    if args.once and args.via == PORT_FORWARD:
        raise UsageError("--once cannot keep a port-forward open (it lives while attach runs); "
                         "drop --once, or use --via pod-ip")
    return _follow(target, args, token)  # a DiscoveryError is the user's to act on: cli.py says it


def via(args: argparse.Namespace) -> str:
    """How members are reached: `auto` is the pod address in-cluster (where pod IPs route) and with --once
    (nothing would keep a forward open), else a port-forward through the API server."""
    if args.via != "auto":
        return str(args.via)
    inside = args.kubeconfig is None and in_cluster()
    return POD_IP if inside or args.once else PORT_FORWARD


def _follow(target: K8sTarget, args: argparse.Namespace, token: str | None) -> int:
    """The body of run_k8s_attach."""
    api = api_client(args.kubeconfig, args.context)
    members = RegistryMembers(Registry(), target, _say, args.name, token, args.token_header)
    forwards = None
    if via(args) == PORT_FORWARD:  # it hands members on itself: a pod it forwards later joins then
        forwards = PortForwards(target.namespace, api.configuration, _say, publish=members)
    on_change = members if forwards is None else forwards
    follower = PodFollower(target, api, on_change, on_error=lambda line: _say(f"warning: {line}"))
    if args.once:
        follower.sync()
        print(f"{target.label}: {len(follower.members)} ready pod(s)")
        return 0
    ends = "closes the forwards and their sessions" if forwards else "the sessions stay"
    print(f"following {target.label} via {via(args)} (Ctrl-C stops; {ends})", flush=True)
    try:
        with _sigterm_interrupts():
            follower.follow()
    except KeyboardInterrupt:
        follower.stop()
        print(f"stopped following {target.label}: {len(follower.members)} ready pod(s)", flush=True)
    finally:
        if forwards is not None:  # their addresses die with this process: so do their sessions
            forwards.close()
            members({})
    return 0


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """A SIGTERM (a service manager, `kill`) stops attach as Ctrl-C does, closing what it opened."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    """Raise KeyboardInterrupt where the main thread is."""
    raise KeyboardInterrupt


def _say(line: str) -> None:
    """Membership changes on stdout, warnings on stderr."""
    to_stderr = line.startswith("warning:")
    print(line, file=sys.stderr if to_stderr else sys.stdout, flush=True)
