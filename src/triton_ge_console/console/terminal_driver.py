"""The driver a console runs in a terminal: Textual's own, resuming only what it suspended."""

from __future__ import annotations

from textual.drivers.linux_driver import LinuxDriver


class TerminalDriver(LinuxDriver):
    """Textual's Linux driver, minus the restart of application mode on a SIGCONT no suspension asked for.

    Textual's driver restarts application mode (a new input thread, not a daemon) on every SIGCONT, for the
    resume after Ctrl+Z. A closing terminal sends SIGCONT too, with its SIGHUP (the kernel's hang-up): when
    the app had already ended, the restarted input thread read the dead terminal's end-of-file in a loop
    for ever (88 % of a core), and the process, which waits for that thread, never ended.
    """

    _suspended = False

    def suspend_application_mode(self) -> None:
        """Suspend (Ctrl+Z, or the app's `suspend`): the next SIGCONT resumes."""
        super().suspend_application_mode()
        self._suspended = True

    def resume_application_mode(self) -> None:
        """Resume what was suspended; a SIGCONT without a suspension changes nothing."""
        if not self._suspended:
            return
        self._suspended = False
        super().resume_application_mode()
