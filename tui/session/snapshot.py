"""The frozen values a session hands its faces: a step's snapshot, an action's result.

Safe to hand to any thread, and to send over the engine's wire (`tui.service.codec`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..engine.views import EngineSnapshot


@dataclass(frozen=True)
class Projection:
    """When the campaign is expected to end, and from what: the estimate or the calendar."""
    planned_end_t: float | None
    projected_end_t: float | None
    source: str  # "estimate" | "calendar" | "none"


@dataclass(frozen=True)
class WrapupProgress:
    """The wrap-up as the faces show it: running or not, its lines, its result."""

    running: bool = False
    lines: tuple[str, ...] = ()
    ok: bool | None = None  # None until it finished
    text: str | None = None
    attempted: bool = False
    started_t: float | None = None  # which wrap-up: a client follows the one it asked for
    times: tuple[float, ...] = ()  # when each line was said (a client prints these)


class LinkState(str, enum.Enum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    LOST = "lost"  # the engine's link dropped; the client retries and catches up


@dataclass(frozen=True)
class LinkStatus:
    """How a client of the engine process is linked to it: the room says "link lost
    since HH:MM" from this, and what it last heard stays on screen."""
    state: LinkState
    since_t: float
    detail: str | None = None
    where: str = "this box"
    engine_pid: int | None = None
    attempts: int = 0

    @property
    def lost(self) -> bool:
        return self.state == LinkState.LOST


@dataclass(frozen=True)
class SessionSnapshot:
    """One step of a session, frozen: everything a face draws, safe for any thread."""
    now: float
    engine: EngineSnapshot
    projection: Projection
    probe: object | None = None  # ProbeSample of the last sampling
    holders: tuple[tuple[int, tuple[str, ...]], ...] = ()  # device -> run ids
    conclusion: object | None = None  # tui.engine.conclusion.outcome.Conclusion once the runs ended
    ending: object | None = None  # tui.session.ending.Ending: verdict, budget, bundle
    wrapup: WrapupProgress = WrapupProgress()
    tick_error: str | None = None
    link: LinkStatus | None = None  # set by a client of the engine process; None in-process
    store: object | None = None  # tui.store.status.MirrorStatus: what is stored off the box

    @property
    def state(self):
        return self.engine.state

    @property
    def phase(self) -> str:
        return self.engine.phase

    @property
    def idle(self) -> bool:
        """Nothing can change by itself: no live run, no verification, no wrap-up."""
        return (not self.engine.state.running and not self.engine.pending_verifications
                and not self.wrapup.running and self.engine.state.decision_pending is None
                and self.phase in ("finished", "wrapup", "done", "blocked"))


@dataclass(frozen=True)
class ActionResult:
    """An action's outcome as a value: done, or refused with the reason in words."""
    ok: bool
    message: str
