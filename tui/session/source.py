"""The interface the control room is built against: a session it can step and ask.

Declared as a Protocol so the App never learns what drives the campaign: a
`CampaignSession` in the same process (tests, a replayed one in snapshot
tests) or, as `itera-tui` runs it, `tui.service.client.EngineClient`, the
engine process's client over its socket or an ssh bridge. The room never
reaches into an engine.
"""

from __future__ import annotations

from typing import Callable, Protocol

from ..engine.decision.answer import Decision
from ..engine.ledger.events import Event
from .snapshot import ActionResult, SessionSnapshot, WrapupProgress


class SessionSource(Protocol):
    plan: object

    def step(self, tick: bool = True, sample: bool = True) -> SessionSnapshot: ...

    def replayed(self) -> SessionSnapshot: ...  # from memory: the first frame's snapshot

    def history(self, limit: int) -> list[Event]: ...

    def subscribe(self, listener: Callable[[Event], None]) -> None: ...

    def on_snapshot(self, callback: Callable[[], None]) -> bool: ...
    """Call `callback` (from any thread, no argument) each time a new snapshot is
    there; True when this source pushes, so the room steps it on each push and on a
    slow clock only (memray's update thread posts when data arrives); False when it
    must be stepped to move at all (an engine in the room's own process)."""

    def checkpoint(self, run_id: str) -> ActionResult: ...

    def drop(self, variant_id: str, at_decision: bool = False) -> ActionResult: ...

    def drop_many(self, variant_ids, at_decision: bool = False) -> ActionResult: ...

    def stop(self, run_id: str, reason: str) -> ActionResult: ...

    def pause(self, paused: bool) -> ActionResult: ...

    def decide(self, decision: Decision) -> ActionResult: ...

    def start_wrapup(self, on_line: Callable[[str], None] | None = None) -> ActionResult: ...

    def wait_wrapup(self, timeout: float | None = None) -> WrapupProgress: ...

    def wrapup_progress(self) -> WrapupProgress: ...

    def close(self) -> None: ...

