"""The decision deadline, and the time the GPUs waited on a person.

With `[pilot] decide = "ask"` the queue waits at the decision point; a pilot
that ends at 02:00 would leave the GPUs idle until someone wakes up, paid by
the hour. `decide_after_minutes` bounds that wait: the deadline is written in
the `decision_pending` event (so a restart keeps it), and when it passes with
no answer the engine takes `default` with `by = "deadline"`. An answer before
it simply closes the decision point: nothing is left to cancel.

The wait itself is measured from the ledger (each decision's `decision_pending`
time to its `decision_taken` time) and shown in the ending and the report.
Pure functions of the plan and the replayed state: a fake clock tests them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...campaign.loading.sections import RULES
from ...campaign.plan import Plan
from ...campaign.units import human_duration
from ..ledger.state import CampaignState
from ..ledger.events import DecisionKind
from .answer import CONTINUE, Decision


@dataclass(frozen=True)
class DecisionDeadline:
    """When the engine decides alone, and what it takes then."""

    at: float
    default: str  # continue | wrapup | drop-stopped


def deadline_of(plan: Plan, opened_t: float) -> DecisionDeadline | None:
    """The deadline of a decision point opened at `opened_t` (None: it waits)."""
    pilot = plan.pilot
    if pilot is None or pilot.decide != "ask" or pilot.decide_after_minutes is None:
        return None
    return DecisionDeadline(opened_t + pilot.decide_after_minutes * 60.0, pilot.default)


def stopped_in_pilot(plan: Plan, state: CampaignState) -> list[str]:
    """Optional variants an announced `[[stop]]` rule stopped during their pilot."""
    out = []
    for v in plan.variants:
        if v.optional and v.id not in state.dropped and any(
                r.stop is not None and r.stop.rule in RULES
                for r in state.runs_of(v.id, "pilot")):
            out.append(v.id)
    return out


def default_decision(plan: Plan, state: CampaignState, default: str) -> Decision:
    """The decision `default` stands for now (`drop-stopped` with nothing stopped is
    `continue`)."""
    if default != "drop-stopped":
        return Decision(DecisionKind(default))  # continue | wrapup
    stopped = stopped_in_pilot(plan, state)
    return Decision.drop(*stopped) if stopped else CONTINUE


def due_decision(plan: Plan, state: CampaignState, now: float) -> Decision | None:
    """The default to take now, if the open decision point's deadline has passed."""
    pending = state.decision_pending
    if pending is None or pending.deadline is None or now < pending.deadline:
        return None
    return default_decision(plan, state, pending.default or "continue")


def decision_wait_s(state: CampaignState, now: float | None = None) -> float | None:
    """Seconds the queue waited on a person in all (None: no decision point yet);
    a decision point still open counts up to `now`."""
    waits = [d.waited_s for d in state.decisions if d.waited_s is not None]
    if state.decision_pending is not None and now is not None:
        waits.append(max(0.0, now - state.decision_pending.t))
    return sum(waits) if waits else None


def decision_wait_text(plan: Plan, state: CampaignState, now: float | None = None) -> str | None:
    """"GPUs idle waiting for a decision: 2 h 10 min (3.0 % of the window)", per lot
    when there are several (each lot's share of its own window)."""
    waited = decision_wait_s(state, now)
    if waited is None:
        return None
    shares = []
    for lot in plan.lots:
        pct = 100.0 * waited / (lot.hours * 3600.0) if lot.hours > 0 else 0.0
        shares.append((lot, pct))
    head = f"GPUs idle waiting for a decision: {human_duration(waited)}"
    if len(shares) == 1:
        return f"{head} ({shares[0][1]:.1f} % of the window)"
    return head + " (" + "; ".join(
        f"lot {lot.id}, {lot.gpus} GPU{'s' if lot.gpus > 1 else ''}: {pct:.1f} % of its "
        "window" for lot, pct in shares) + ")"
