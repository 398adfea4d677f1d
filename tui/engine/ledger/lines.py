"""One readable line per ledger event, for the headless log and the events panel.

Each event class says its own line (`Event.describe`); a line carries text a run
controls (a stop reason, a checkpoint's error, a note), so every line leaves here
cleaned for a terminal (`for_terminal`)."""

from __future__ import annotations

from ...campaign.text import for_terminal
from .events import Event, clock_text, parse  # noqa: F401  (clock_text: its one home)


def describe(ev: Event | dict) -> str | None:
    """A human line for an event, or None for bookkeeping not worth showing; cleaned
    for a terminal (controls and escape sequences made visible)."""
    if isinstance(ev, dict):
        try:
            ev = parse(ev)
        except ValueError:
            return None
    line = ev.describe()
    return None if line is None else for_terminal(line)
