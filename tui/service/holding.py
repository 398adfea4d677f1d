"""Decision holding: an automatic "continue" is applied only once the pilots are seen.

`--decide continue` or the plan's `decide = "continue"` is taken from the
engine when the service starts and given back at the decision point, unless
the control's pilot failed (the full runs would fail the same way): then
headless ends (`HELD`), and the detached engine says so once in the ledger
and waits for a person (or the decision deadline).
"""

from __future__ import annotations

import enum
from ..engine.ledger.events import WarningEvent


class Hold(str, enum.Enum):
    """What the held "continue" asks of the loop at a decision point."""
    WAIT = "wait"  # nothing to do yet, or a person decides from here
    END = "end"  # headless with nobody attached: end (ServeEnd.HELD)


class HeldContinue:
    def __init__(self, session, hold: bool):
        self.session = session
        self.held: str | None = None
        if hold and session.engine.auto_decision == "continue":
            self.held, session.engine.auto_decision = "continue", None
        self._said = False
        self.warning: str | None = None

    def check(self, snap, exit_at_decision: bool, clients: int) -> Hold:
        """At the decision point: the held "continue" applied (the caller wakes the
        loop), or (the control's pilot failed) not."""
        from ..engine.decision.pilots import continue_warning

        pending = snap.state.decision_pending
        warning = continue_warning(self.session.plan, pending.pilot) \
            if pending is not None else None
        if warning is None:
            if pending is None:
                return Hold.WAIT  # the pending event is recorded on the next tick
            self.session.engine.auto_decision, self.held = self.held, None
            return Hold.WAIT
        self.warning = warning
        if exit_at_decision and clients == 0:
            return Hold.END
        if not self._said:
            self._said = True
            self.session.engine.journal.record(WarningEvent(message=f"not continuing by itself: {warning}; answer the "
                "decision in the room or with `itera-tui decide`"))
        self.held = None  # a person (or the deadline) decides from here
        return Hold.WAIT
