"""The ledger and the state it replays to, kept in step.

Every fact of a campaign is recorded here first: `record()` appends one
fsync'ed ledger line, folds it into the state builder and tells the
subscribers (the headless printer, the control room's events panel). The
engine's parts (launching, watching, checkpoints, actions) all write through
one Journal, so none of them owns the state and none reaches into another.
"""

from __future__ import annotations

import threading
from collections import deque
from pathlib import Path
from typing import Callable

from .events import Event
from .file import Ledger
from .state import CampaignState, StateBuilder

Listener = Callable[[Event], None]
RECENT_EVENTS = 1000  # what a face that opens late shows of the past, kept in memory
LISTENER_FAILURES = 20  # kept until the engine says them (each distinct one once)


class Journal:
    def __init__(self, path: Path, clock: Callable[[], float]):
        self.path = Path(path)
        self.clock = clock
        self._builder = StateBuilder()
        self._listeners: list[Listener] = []
        self._ledger: Ledger | None = None
        self._recent: deque[Event] = deque(maxlen=RECENT_EVENTS)
        self._recent_lock = threading.Lock()  # read by a face's thread, written by another
        self._failures: deque[str] = deque(maxlen=LISTENER_FAILURES)

    def open(self, report=None) -> list[Event]:
        """Replay what the ledger holds (checked line by line), then accept new events;
        returns the replayed events. `report`: the ledger's report, if already read."""
        self._ledger = Ledger(self.path, self.clock, report)
        events = self._ledger.report.events
        for ev in events:
            self._builder.apply(ev)
        with self._recent_lock:
            self._recent.extend(events)
        return events

    def recent(self, limit: int) -> list[Event]:
        """The last `limit` events (at most RECENT_EVENTS), from memory: the room's
        events panel starts with them without reading the ledger on its UI thread."""
        with self._recent_lock:
            recent = list(self._recent)
        return recent[len(recent) - max(0, min(limit, len(recent))):]

    @property
    def report(self):
        """The ledger's health as read at open: damage, torn tail, unknown run dirs."""
        return self._ledger.report

    @property
    def cut_tail(self) -> int:
        return self._ledger.cut_tail

    def tail_warnings(self) -> list[str]:
        """What the open did to a torn last line a crash left half-written, in words."""
        out = []
        if self._ledger.cut_tail:
            out.append(f"ledger: cut a torn last line ({self._ledger.cut_tail} bytes) a crash "
                       "left half-written")
        if self._ledger.ended_tail:
            out.append(f"ledger: a torn last line ({self._ledger.ended_tail} bytes) a crash "
                       "left half-written was ended with a newline, not cut (the ledger may "
                       "only be appended to): it stays as one damaged line")
        return out

    def close(self) -> None:
        """Let go of the ledger file (kept open between appends); a later record opens
        it again."""
        if self._ledger is not None:
            self._ledger.close()

    @property
    def opened(self) -> bool:
        return self._ledger is not None

    @property
    def state(self) -> CampaignState:
        return self._builder.freeze()

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def record(self, event: Event) -> Event:
        """Append one event (an instance of a class of ledger.events), fold it, tell
        the listeners; returns it stamped with its seq and time."""
        ev = self._ledger.append(event)
        self._builder.apply(ev)
        with self._recent_lock:
            self._recent.append(ev)
        for listener in list(self._listeners):
            try:
                listener(ev)
            except Exception as exc:  # a face's failure is the face's: the fact is recorded,
                # the producer goes on (an unencodable inf once failed the engine's tick)
                name = getattr(listener, "__qualname__", type(listener).__name__)
                self._failures.append(f"{name} failed on {ev.KIND}: "
                                      f"{type(exc).__name__}: {exc}"[:300])
        return ev

    def take_listener_failures(self) -> list[str]:
        """What the listeners failed on since the last call (the engine warns of each)."""
        taken = list(self._failures)
        self._failures.clear()
        return taken
