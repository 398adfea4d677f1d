"""The decision point after the pilots, as one object: asked, held, answered.

Once every pilot has ended the queue stops and asks: continue, drop some optional
variants (then continue), or wrap up. `DecisionPoint` owns all of it:

- what is pending: the `decision_pending` line, with the pilots' figures, the
  deadline and its default (deadline.py), written once;
- an answer given in advance (`--decide` when the campaign started, or the
  plan's `[pilot] decide = "continue"`), taken as soon as the point opens;
- the held "continue": under a service (the detached engine, headless) an
  automatic "continue" is taken only once the pilots are seen, and not when the
  control's own pilot failed (the full runs would fail the same way). Then
  `held_warning` says why; the service either ends (headless with nobody
  attached) or `release_held()` says it once in the ledger and a person (or
  the deadline) decides;
- the deadline: past it, the default is taken;
- who answered (`DecidedBy`): the room, `itera-tui decide`, the flag, the plan
  or the deadline, recorded as such in `decision_taken`, so every view (the
  events panel, `status`, the notices) says it in its own words.

Everything here reads the plan, the ledger's state and an injected clock: a fake
clock tests it without a process.
"""

from __future__ import annotations

import threading
from typing import Callable

from ...campaign.plan import Plan
from ..errors import EngineError
from ..ledger.events import (DROPPED_BY_DECISION, DecidedBy, DecisionAsked, DecisionTaken,
                             VariantDropped, WarningEvent)
from ..ledger.journal import Journal
from ..ledger.records import DecisionPending
from .answer import CONTINUE, Decision
from .deadline import deadline_of, due_decision
from .pilots import continue_warning

NOT_PENDING = ("no decision is pending: the decision point comes once every pilot "
               "has ended")


class DecisionPoint:
    def __init__(self, plan: Plan, journal: Journal, clock: Callable[[], float],
                 lock: threading.RLock, given: Decision | None = None):
        """`given`: the answer the campaign was started with (`--decide`)."""
        self.plan = plan
        self.journal = journal
        self.clock = clock
        self.lock = lock
        pilot = plan.pilot
        self.auto: Decision | None = given if given is not None else (
            CONTINUE if pilot is not None and pilot.decide == "continue" else None)
        self.auto_by = DecidedBy.FLAG if given is not None else DecidedBy.PLAN
        self.hold = False  # an automatic "continue" waits for the pilots' figures
        self.held_warning: str | None = None  # why the held "continue" is not taken

    @property
    def pending(self) -> DecisionPending | None:
        return self.journal.state.decision_pending

    @property
    def held(self) -> bool:
        """An automatic "continue" waits for the pilots before it is taken."""
        return self.hold and self.auto == CONTINUE

    def hold_continue(self, hold: bool = True) -> None:
        """Under a service: an automatic "continue" only once the pilots are seen."""
        self.hold = hold

    def waits_for_a_person(self) -> bool:
        """Nothing will answer by itself: no answer given in advance, no deadline."""
        pending = self.pending
        return self.auto is None and (pending is None or pending.deadline is None)

    # -- the engine's tick, at the decision phase ---------------------------------------
    def step(self, pilot_figures: Callable[[], dict]) -> None:
        """Open the point (once), then take the answer given in advance, or the default
        once the deadline has passed."""
        with self.lock:
            if self.pending is None:
                self._open(pilot_figures())
            if self.auto is not None:
                self._take_auto()
                return
            due = due_decision(self.plan, self.journal.state, self.clock())
            if due is not None:  # nobody answered in time: the GPUs do not wait till morning
                minutes = self.plan.pilot.decide_after_minutes if self.plan.pilot else None
                self.answer(due, DecidedBy.DEADLINE, f"no answer within {minutes:g} min"
                            if minutes else "no answer before the deadline")

    def _open(self, figures: dict) -> None:
        taken_at_once = self.auto is not None and not self.held
        deadline = None if taken_at_once else deadline_of(self.plan, self.clock())
        self.journal.record(DecisionAsked(pilot=figures,
                            deadline=deadline.at if deadline else None,
                            default=deadline.default if deadline else None,
                            auto=self.auto.text if taken_at_once else None))

    def _take_auto(self) -> None:
        if self.held:
            warning = continue_warning(self.plan, self.pending.pilot)
            if warning is not None:
                self.held_warning = warning  # the service ends, or `release_held`
                return
        decision, self.auto = self.auto, None
        self.answer(decision, self.auto_by)

    def release_held(self) -> None:
        """The held "continue" is not taken (the control's pilot failed): said once in the
        ledger, and a person (or the deadline) decides from here."""
        with self.lock:
            if self.held_warning is None or self.auto is None:
                return
            self.auto = None
            self.journal.record(WarningEvent(message=f"not continuing by itself: "
                                f"{self.held_warning}; answer the decision in the room or "
                                "with `itera-tui decide`"))

    # -- an answer ------------------------------------------------------------------
    def answer(self, decision: Decision, by: DecidedBy = DecidedBy.PERSON,
               note: str | None = None) -> None:
        """Record the decision (and each drop it makes); an EngineError when nothing is
        pending or the plan refuses it (a mandatory or unknown variant)."""
        with self.lock:
            if self.pending is None:
                raise EngineError(NOT_PENDING)
            decision.check(self.plan)
            self.journal.record(DecisionTaken(decision=decision.kind,
                                drop=list(decision.variants), by=by, note=note))
            for vid in decision.variants:
                self.journal.record(VariantDropped(variant=vid,
                                    reason=f"{DROPPED_BY_DECISION}{by}"))
