"""Messages the fleet screen's workers post: the UI thread is the only one that touches widgets."""

from __future__ import annotations

from textual.message import Message

from triton_ge_console.fleet.members import FleetMember
from triton_ge_console.fleet.rolling import RollingResult
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot


class MemberSnapshotArrived(Message):
    """One member's poll finished."""

    def __init__(self, member: str, snapshot: ServerSnapshot) -> None:
        super().__init__()
        self.member = member
        self.snapshot = snapshot


class RollFinished(Message):
    """A rolling reload over the fleet finished (or stopped at a failure)."""

    def __init__(self, result: RollingResult) -> None:
        super().__init__()
        self.result = result


class MembersChanged(Message):
    """Sessions came or went: the fleet has new members; `left` are to be closed once unpolled."""

    def __init__(self, left: list[FleetMember]) -> None:
        super().__init__()
        self.left = left
