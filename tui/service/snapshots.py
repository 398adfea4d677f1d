"""Snapshot throttling: how often the engine's snapshot crosses to its clients, and how whole.

A snapshot goes out when the ledger moved, else every `SNAPSHOT_EVERY_S`
while something runs (`CLOCK_EVERY_S` when nothing does); the charts' points
(the bulk of it) only every `HISTORY_EVERY_S`, the client keeps its last in
between (service/histories.py). A client still holding `SNAPSHOT_BACKLOG`
gets no new one: it would only pile up. Publishing is never fatal to the engine.
"""

from __future__ import annotations

from typing import Callable

from .codec import to_wire
from .histories import enveloped, without_histories
from .protocol import encode

SNAPSHOT_BACKLOG = 1024 * 1024  # a client still holding this much gets no new snapshot
SNAPSHOT_EVERY_S = 2.0  # while something moves (the room moves its own clocks in between)
CLOCK_EVERY_S = 5.0  # clocks and ages, when nothing else moved
IDLE_POLL_S = 5.0  # nothing can change by itself: step this often (a client wakes it)
HISTORY_EVERY_S = 10.0  # the charts' points (the bulk of a snapshot) cross this often;
# snapshots in between leave them out and the client keeps its last (service/histories.py)


def first_frame(snap) -> bytes:
    """A new face's first frame, at once and light: the last step's runs and state, none
    of the charts' points, the conclusion or the ending (the next snapshot, a moment
    later, brings them whole), so a room paints before it has loaded what those need."""
    from dataclasses import replace

    light = replace(without_histories(snap), conclusion=None, ending=None)
    return encode({"op": "snapshot", "histories": False, "snapshot": to_wire(light)})


class SnapshotThrottle:
    """When a snapshot is due, encoded once for every client that takes one."""

    def __init__(self, hub, monotonic: Callable[[], float], say: Callable[[str], None]):
        self.hub = hub
        self.monotonic = monotonic
        self.say = say
        self._last_publish = float("-inf")
        self._last_history = float("-inf")
        self._state_wire: tuple | None = None
        self._error: str | None = None
        self._last_events = None

    def whole_next(self) -> None:
        """A new face: the next snapshot at once, whole."""
        self._last_publish = self._last_history = float("-inf")

    def publish(self, snap, force: bool = False) -> None:
        """Send the snapshot to the clients that want one (never fatal to the engine)."""
        try:
            self._publish_now(snap, force)
        except Exception as exc:
            text = f"a snapshot could not be sent: {type(exc).__name__}: {exc}"
            if text != self._error:
                self._error = text
                self.say(text)

    def _publish_now(self, snap, force: bool = False) -> None:
        now = self.monotonic()
        moved = snap.state.events != self._last_events
        every = IDLE_POLL_S * 3 if snap.idle else (SNAPSHOT_EVERY_S if snap.state.running
                                                    or snap.wrapup.running else CLOCK_EVERY_S)
        if not (force or moved or now - self._last_publish >= every):
            return
        with self.hub.lock:
            takers = [c for c in self.hub.clients.values()
                      if c.subscribed and c.snapshots and len(c.wbuf) < SNAPSHOT_BACKLOG]
        if not takers:
            return
        histories = force or now - self._last_history >= HISTORY_EVERY_S
        if histories:
            self._last_history = now
            snap = enveloped(snap)
        else:
            snap = without_histories(snap)
        state = snap.engine.state  # the same object until the next event: encoded once
        if self._state_wire is None or self._state_wire[0] is not state:
            self._state_wire = (state, to_wire(state))
        data = encode({"op": "snapshot", "histories": histories,
                       "snapshot": to_wire(snap, known={id(state): self._state_wire[1]})})
        self._last_publish, self._last_events = now, snap.state.events
        for client in takers:
            self.hub.send(client, data)
