"""The console over a fleet: opens on the fleet screen, one poller for every server; Enter opens a
server's dashboard (the app then acts on that server), Esc returns."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import ClassVar

from textual import work
from textual.reactive import reactive
from textual.screen import Screen

from triton_ge_console.console import actions, lifeline, long_lived
from triton_ge_console.console.app import GEConsoleApp, next_connection
from triton_ge_console.console.connection import Connection
from triton_ge_console.console.fleet_messages import MembersChanged, MemberSnapshotArrived, RollFinished
from triton_ge_console.console.messages import SnapshotArrived
from triton_ge_console.console.options import ConsoleOptions, FleetOptions
from triton_ge_console.console.screens.confirm import ConfirmScreen
from triton_ge_console.console.screens.fleet import FleetScreen, MemberDashboard, roll_summary
from triton_ge_console.console.screens.help import HelpScreen
from triton_ge_console.fleet.figures import FleetFigures
from triton_ge_console.fleet.members import FleetMember, FleetSource, member_named
from triton_ge_console.fleet.models import FleetModelRow
from triton_ge_console.fleet.rolling import RollingResult
from triton_ge_console.fleet.status import FleetRow
from triton_ge_console.sessions.observe.follow import Follower

OptionsFor = Callable[[FleetMember], ConsoleOptions]


class FleetConsoleApp(GEConsoleApp):
    """The fleet screen first; the dashboard and every server action act on the opened member."""

    FLEET_IDS: ClassVar[frozenset[str]] = frozenset(a.id for a in actions.FLEET_ACTIONS)
    fleet_rows: reactive[tuple[FleetRow, ...]] = reactive((), init=False, repaint=False)
    fleet_models: reactive[tuple[FleetModelRow, ...]] = reactive((), init=False, repaint=False)
    last_roll: reactive[RollingResult | None] = reactive(None, init=False, repaint=False)

    def __init__(self, fleet: FleetSource, options_for: OptionsFor,
                 fleet_options: FleetOptions | None = None) -> None:
        if not fleet.members:
            raise ValueError("a fleet needs at least one member")
        self.fleet = fleet
        self.options_for = options_for
        self.fleet_options = fleet_options or FleetOptions()
        super().__init__(fleet.members[0].source, options_for(fleet.members[0]))
        self.figures = FleetFigures(fleet.members)
        self.current: str | None = None  # the member whose dashboard is open
        self.follow_stop = threading.Event()
        self.set_reactive(FleetConsoleApp.fleet_rows, self.figures.rows)

    @property
    def member_polls(self) -> dict[str, int]:
        """How many polls of each member came back."""
        return self.figures.polls

    def get_default_screen(self) -> Screen[None]:
        """The fleet screen is the home screen."""
        return FleetScreen()

    def on_mount(self) -> None:
        """Leave start-up objects out of full collections; follow every member."""
        long_lived.leave_out_start_up_objects()
        self.lifeline = lifeline.hold_for(self)
        self._follow_worker(self.fleet.members, self.follow_stop)
        if self.fleet_options.rescan_s:
            self.set_interval(self.fleet_options.rescan_s, self._rescan_worker)

    def on_unmount(self) -> None:
        """Stop following (its pool ends with it), then what the single-server app releases."""
        self.follow_stop.set()
        super().on_unmount()

    @work(thread=True, group="fleet-poll", exit_on_error=False)
    def _follow_worker(self, members: list[FleetMember], stop: threading.Event) -> None:
        """Every member polled at its own pace until `stop`; each snapshot comes back as a message."""
        options = self.fleet_options
        follower = Follower([m.source for m in members], interval_s=options.interval_s,
                                 backoff_s=options.backoff_s, max_workers=options.max_workers,
                                 max_polls=options.max_polls)
        follower.run(lambda name, snap: self.post_message(MemberSnapshotArrived(name, snap)), stop)

    @work(thread=True, exclusive=True, group="fleet-rescan", exit_on_error=False)
    def _rescan_worker(self) -> None:
        """Look the members up again (the registry: sessions started, stopped, pods found or gone)."""
        left = self.fleet.rescan()
        if left is not None:
            self.post_message(MembersChanged(left))

    def on_members_changed(self, message: MembersChanged) -> None:
        """Follow the new members (the old follower stops), keep the rows of those that stayed."""
        self.follow_stop.set()
        self.follow_stop = threading.Event()
        members = list(self.fleet.members)
        self.figures = self.figures.regrouped(members)
        self.fleet_rows = self.figures.rows
        self.fleet_models = self.figures.models
        self._follow_worker(members, self.follow_stop)
        for member in message.left:
            member.source.close()
        gone = ", ".join(m.name for m in message.left)
        self.notify(f"{len(members)} servers now" + (f"; left: {gone}" if gone else ""), title="fleet")

    def on_member_snapshot_arrived(self, message: MemberSnapshotArrived) -> None:
        """Refresh that member's row and the models across the fleet; feed its dashboard if open."""
        self.figures.take(message.member, message.snapshot)
        self.fleet_rows = self.figures.rows
        self.fleet_models = self.figures.models
        if message.member == self.current:
            self.on_snapshot_arrived(SnapshotArrived(message.snapshot))

    def open_member(self, name: str) -> None:
        """Make `name` the server the dashboard and the server actions act on, and show its dashboard."""
        member = member_named(self.fleet, name)
        if self.watch_stop is not None:  # a repository watch belongs to the server it was started on
            self.watch_stop.set()
            self.watch_stop = None
        self.source = member.source
        self.options = self.options_for(member)
        self.init_handler_state()
        self.selected_model = None
        self.current = name
        connection = Connection(name, self.fleet_options.interval_s)
        if name in self.figures.latest:
            connection = next_connection(connection, self.figures.latest[name], self.options)
        self.connection = connection
        self.push_screen(MemberDashboard())

    def close_member(self) -> None:
        """Back to the fleet screen."""
        self.current = None
        while len(self.screen_stack) > 1:
            self.pop_screen()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """On the fleet screen only the fleet's actions run (the server ones need an open server)."""
        if action == "run" and parameters and isinstance(self.screen, FleetScreen):
            return parameters[0] in self.FLEET_IDS
        return True

    def action_run(self, action_id: str) -> None:
        """Fleet actions here (a rolling reload asks first); the rest as on a single server."""
        if action_id not in self.FLEET_IDS or action_id == "show_help":
            super().action_run(action_id)
            return
        handler = self._notifying_on_error(action_id, getattr(self, f"action_{action_id}"))
        if action_id != "rolling_reload":
            handler()
            return
        model = self._fleet_screen().selected_model()
        if model is None:
            self.notify("select a model in the models view first (m)", severity="warning")
            return
        servers = len(self.fleet.members)
        question = f"{actions.find(action_id).description}?"

        def confirmed(answer: bool | None) -> None:
            if answer:
                handler()

        self.push_screen(ConfirmScreen(question, f"{model} on {servers} servers, one at a time"), confirmed)

    def _fleet_screen(self) -> FleetScreen:
        """The fleet screen (always at the bottom of the stack)."""
        screen = self.screen_stack[0]
        assert isinstance(screen, FleetScreen)
        return screen

    def action_open_server(self) -> None:
        """The selected server's dashboard."""
        name = self._fleet_screen().selected_server()
        if name is not None:
            self.open_member(name)

    def action_toggle_fleet_view(self) -> None:
        """Servers or models across servers."""
        self._fleet_screen().toggle_view()

    def action_show_help(self) -> None:
        """Every action of the screen in front, with its key."""
        self.push_screen(HelpScreen(getattr(self.screen, "REGISTRY", actions.ACTIONS)))

    def action_rolling_reload(self) -> None:
        """Roll the selected model over the fleet in a worker."""
        model = self._fleet_screen().selected_model()
        if model is not None:
            self.notify(f"rolling reload of {model}: one server at a time…", timeout=3)
            self._roll_worker(model)

    @work(thread=True, exclusive=True, group="fleet-roll", exit_on_error=False)
    def _roll_worker(self, model: str) -> None:
        """The blocking roll; each server's step shows as it happens."""
        result = self.fleet.roll(model, lambda line: self.call_from_thread(
            self.notify, line, title=f"rolling reload {model}", timeout=4))
        self.post_message(RollFinished(result))

    def on_roll_finished(self, message: RollFinished) -> None:
        """Say how it ended and who runs which version now."""
        self.last_roll = message.result
        self.notify(roll_summary(message.result), title=f"rolling reload {message.result.model}",
                    severity="information" if message.result.ok else "error", timeout=10)

