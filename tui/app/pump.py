"""The control room's update thread: steps the session, hands back snapshots.

Modelled on memray's live TUI: one thread does the work, requests merge (an
Event, so ten timer ticks while a slow step runs cost one more step, not
ten), and what crosses to the UI thread is a frozen `SessionSnapshot`. A
snapshot is delivered when the ledger moved, when something else visible
changed (at most once per `refresh_interval`), and every few seconds for the
clocks. When nothing can change by itself (no live run, no verification, no
wrap-up) the pump steps only every `idle_interval`, until a key or an event
wakes it: a finished campaign left open for days costs next to nothing.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from ..session import SessionSnapshot
from .room import signature

CLOCK_REFRESH_S = 5.0  # countdown and ages move even when nothing else does
IDLE_CLOCK_REFRESH_S = 15.0  # a finished campaign's countdown reads in minutes


def fatal_exit(app, text: str) -> None:
    """The engine stopped (its ledger cannot be written): the room closes with that one
    line and the engine's exit status; the runs go on in their own sessions."""
    from ..engine.errors import EXIT_LEDGER_UNWRITABLE

    app.exit(return_code=EXIT_LEDGER_UNWRITABLE, message=f"itera-tui: {text}")


class SessionPump:
    def __init__(self, session, deliver: Callable[[SessionSnapshot], None],
                 on_error: Callable[[str], None], *, refresh_interval: float = 1.0,
                 idle_interval: float = 15.0, monotonic: Callable[[], float] = time.monotonic,
                 on_fatal: Callable[[str], None] | None = None):
        self.session = session
        self.deliver = deliver
        self.on_error = on_error
        self.on_fatal = on_fatal  # the engine stopped (its ledger cannot be written)
        self.refresh_interval = refresh_interval
        self.idle_interval = idle_interval
        self.monotonic = monotonic
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._urgent = False
        self._idle = False
        self._last_step = float("-inf")
        self._last_post = float("-inf")
        self._last_events = None
        self._last_sig = None
        self._last_error = None
        self.pushed = False  # the source pushes its snapshots (follow_pushes)
        self._thread = threading.Thread(target=self._loop, name="itera-pump", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def follow_pushes(self) -> bool:
        """Step on each snapshot the source pushes (an engine in its own process), so the
        room's timer only keeps the clocks moving; False: the source must be polled."""
        on_snapshot = getattr(self.session, "on_snapshot", None)
        self.pushed = bool(on_snapshot is not None
                           and on_snapshot(lambda: self.request(urgent=True)))
        return self.pushed

    def request(self, urgent: bool = False) -> None:
        """Ask for a step (a timer); `urgent` (a key, an event) also ends idling."""
        if urgent:
            self._urgent = True
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop stepping; waits for a step in flight (runs are untouched)."""
        self._stopped.set()
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    @property
    def idle(self) -> bool:
        return self._idle

    def _loop(self) -> None:
        # the figures the first frame lacked (conclusion, estimate: read from the runs'
        # files) come before any engine tick, so a slow tick does not hold them back
        self._publish(self._safe(lambda: self.session.step(tick=False, sample=False)), True)
        while not self._stopped.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stopped.is_set():
                return
            now = self.monotonic()
            urgent, self._urgent = self._urgent, False
            if self._idle and not urgent and now - self._last_step < self.idle_interval:
                continue
            self._last_step = now
            self._step(urgent)

    def _safe(self, step):
        from ..engine.errors import LedgerUnwritable

        try:
            return step()
        except LedgerUnwritable as exc:  # not a bad step: the engine stopped; so does the room
            self._error(str(exc))
            self._stopped.set()
            if self.on_fatal is not None:
                self.on_fatal(str(exc))
            return None
        except Exception as exc:  # the room must outlive a bad step
            self._error(f"session step failed: {type(exc).__name__}: {exc}")
            return None

    def _step(self, force: bool) -> None:
        self._publish(self._safe(self.session.step), force)

    def _publish(self, snap, force: bool) -> None:
        if snap is None:
            return
        if snap.tick_error:
            self._error(snap.tick_error)
        else:
            self._last_error = None
        self._idle = snap.idle
        mono = self.monotonic()
        sig = signature(snap)
        moved = snap.state.events != self._last_events
        due = mono - self._last_post >= self.refresh_interval
        if force or moved or (sig != self._last_sig and due) \
                or mono - self._last_post >= (IDLE_CLOCK_REFRESH_S if snap.idle
                                              else CLOCK_REFRESH_S):
            self._last_events, self._last_sig, self._last_post = snap.state.events, sig, mono
            self.deliver(snap)

    def _error(self, text: str) -> None:
        if text != self._last_error:
            self._last_error = text
            self.on_error(text)
