"""Two clocks: the wall clock for what a person reads, a monotonic one for liveness.

An NTP step on a rented box moves the wall clock by hours in one go. Every
"how long since" the engine acts on (the `stall` and `resume` rules, the
grace before SIGKILL, the pilot's grace at its bound, the watchdog's idle
GPU) is measured on the monotonic clock, so a step never stops a healthy
run nor kills one early. The wall clock still stamps every ledger event and
every text a person reads. A step itself is an event (`clock_stepped`): the
wall clock moved more (or less) than the monotonic clock over one tick.

Times that come from the ledger (a run launched before a restart, a stop
requested before it) are wall times; `MonotonicAnchors` dates each one on the
monotonic clock once, at first sight, from its age on the wall clock then,
and measures from that anchor ever after.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Hashable
from .ledger.events import ClockStepped

STEP_TOLERANCE_S = 30.0  # wall minus monotonic drift over one tick that counts as a step


@dataclass(frozen=True)
class ClockStep:
    """The wall clock jumped: by how much (seconds, + forward), seen over one tick."""

    by_s: float
    wall_before: float
    wall_after: float


class StepDetector:
    """Compares the wall clock's advance with the monotonic clock's, tick to tick."""

    def __init__(self, tolerance_s: float = STEP_TOLERANCE_S):
        self.tolerance_s = tolerance_s
        self._last: tuple[float, float] | None = None

    def observe(self, wall: float, mono: float) -> ClockStep | None:
        last, self._last = self._last, (wall, mono)
        if last is None:
            return None
        drift = (wall - last[0]) - (mono - last[1])
        if abs(drift) < self.tolerance_s:
            return None
        return ClockStep(round(drift, 1), last[0], wall)


def record_clock_step(detector: StepDetector, wall: float, mono: float,
                      record: Callable[..., object]) -> ClockStep | None:
    """Observe the two clocks; a step is recorded as a `clock_stepped` event."""
    step = detector.observe(wall, mono)
    if step is not None:
        record(ClockStepped(by_s=step.by_s, wall_before=step.wall_before,
               note="liveness (stall, resume, grace, watchdog) is timed on the monotonic "
                    "clock and is unaffected"))
    return step


class MonotonicAnchors:
    """Monotonic instants for events known by their wall time, anchored at first sight.

    `elapsed(key, wall_t)`: monotonic seconds since the event `key` that
    happened at wall time `wall_t`. The first call anchors it at
    `mono_now - max(0, wall_now - wall_t)` (a future wall time, left by a
    clock that was ahead, is taken as now); later calls ignore `wall_t`."""

    def __init__(self, wall: Callable[[], float], mono: Callable[[], float] = time.monotonic):
        self.wall = wall
        self.mono = mono
        self._anchor: dict[Hashable, float] = {}

    def anchor(self, key: Hashable, wall_t: float | None) -> float:
        """The monotonic instant of the event (anchored now if first seen)."""
        at = self._anchor.get(key)
        if at is None:
            mono = self.mono()
            age = 0.0 if wall_t is None else max(0.0, self.wall() - wall_t)
            at = self._anchor[key] = mono - age
        return at

    def elapsed(self, key: Hashable, wall_t: float | None) -> float:
        return self.mono() - self.anchor(key, wall_t)

