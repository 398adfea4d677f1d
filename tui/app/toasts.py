"""Where a person's interruptions go: one toast at a time, in the band under the runs table.

At 80x24 a stack of toasts once covered the runs table and the events for
seconds. So: the newest toast replaces the one shown (the CSS keeps the rack
in the band below the table, `screens.tcss`), errors and refusals are also
kept as a line in the events log (a toast fades, the log stays), and over a
zoomed runs table nothing pops up at all (the log has it). Stop rules ring the bell as well,
so tmux marks the window. While a dialog is open nothing pops up over it (its
keys line sat under a toast once): the line goes to the events log instead.
A plain object the App holds (no mixin).
"""

from __future__ import annotations

from .notices import toast_for

TOAST_CHARS = 150  # about three lines of a toast at 80 columns


class ToastGate:
    def __init__(self, app, show):
        """`show(text, title, severity, timeout, markup)`: the App's own notify."""
        self.app = app
        self.show = show
        self._next: tuple | None = None

    def say(self, text: str, title: str = "", severity: str = "information",
            timeout: float | None = None, markup: bool = False,
            log: bool | None = None) -> None:
        app = self.app
        panel = getattr(app, "events_panel", None)
        hidden = app.modal_open() or (app.zoom is not None and app.zoom.covers(
            getattr(app, "runs_panel", None)))
        long = len(text) > TOAST_CHARS  # a toast is a glance; the log keeps the whole line
        if panel is not None and log is not False and (hidden or long or log
                                                        or severity == "error"):
            panel.add_line(app.clock(), f"{title}: {text}" if title else text,
                           "info" if severity == "information" else "warning")
        if hidden:  # a dialog's own keys, or the zoomed table, are never covered
            return
        if self._next is None:
            app.call_later(self._flush)
        self._next = (text[:TOAST_CHARS - 1] + "…" if long else text, title, severity,
                      timeout, markup)  # the newest one wins

    def _flush(self) -> None:
        toast, self._next = self._next, None
        if toast is not None and not self.app.modal_open():  # a dialog opened meanwhile
            self.app.clear_notifications()
            self.show(*toast)

    def dialog_opens(self) -> None:
        """A toast shown over the room would follow onto the dialog: take it away (a
        toast not shown yet goes to the events log instead)."""
        toast, self._next = self._next, None
        panel = getattr(self.app, "events_panel", None)
        if toast is not None and panel is not None:
            text, title, severity = toast[:3]
            panel.add_line(self.app.clock(), f"{title}: {text}" if title else text,
                           "info" if severity == "information" else "warning")
        self.app.clear_notifications()

    def ledger_event(self, ev: dict, awaiting_checkpoint: set[str]) -> None:
        """A ledger event the events log just showed: a toast (and a bell) if it needs one."""
        toast = toast_for(ev, awaiting_checkpoint)
        if toast is None:
            return
        self.app.notify(self.app.events_panel.named(toast.text), title=toast.title,
                        severity=toast.severity, timeout=toast.timeout, log=False)
        if toast.bell:
            self.app.bell()  # tmux marks the window

    def notice(self, message) -> None:
        """An action's result or a refusal (a `Notice` from a worker)."""
        self.app.notify(self.app.events_panel.named(message.text), title=message.title,
                        severity=message.severity,
                        timeout=15 if message.severity == "error" else 6,
                        log=message.log or message.severity == "error")
