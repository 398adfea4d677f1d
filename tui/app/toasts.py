"""Where a person's interruptions go: into the events log itself, never over a panel.

At 80x24 a toast (Textual's floating notification) covered the newest lines of
the events log, or the runs table before that: it hid exactly what it was
about. So a notice is a line of the events log (the log keeps it; a zoomed log,
`z`, shows it whole), drawn marked (`◆`, reversed) for as long as a toast would
have stayed, so the eye finds it; nothing floats over any panel. Stop rules
ring the bell as well, so tmux marks the window. A ledger event is already a
line of the log: its notice only marks that line, it never writes it twice.
A plain object the App holds (no mixin).
"""

from __future__ import annotations

from .notices import toast_for

DEFAULT_TIMEOUT_S = 6.0
LEVEL = {"information": "info", "warning": "warning", "error": "stop"}


class ToastGate:
    def __init__(self, app):
        self.app = app

    def say(self, text: str, title: str = "", severity: str = "information",
            timeout: float | None = None, markup: bool = False,
            log: bool | None = None) -> None:
        """One notice, as a marked line of the events log. `log=False`: the line is in
        the log already, the newest (a ledger event just added): mark it, add none."""
        panel = getattr(self.app, "events_panel", None)
        if panel is None:
            return
        seconds = DEFAULT_TIMEOUT_S if timeout is None else float(timeout)
        if log is False:
            panel.mark_newest(seconds)
        else:
            said = text if not title or text.startswith(title) else f"{title}: {text}"
            panel.add_line(self.app.clock(), said,  # never "decision: decision recorded"
                           LEVEL.get(severity, "info"), notice_s=seconds)

    def ledger_event(self, ev: dict, awaiting_checkpoint: set[str]) -> None:
        """A ledger event the events log just showed: marked (and a bell) if it needs a
        person."""
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
                        timeout=15 if message.severity == "error" else 6)
