"""How a campaign ends, as a person reads it: the verdict, the budget, the bundle.

One frozen record for the control room's done screen, the headless run's last
lines and `status`: the same figures everywhere. With no accepted deliverable
the cost per deliverable is undefined: the incurred cost and the causes are
shown instead, never a zero cost.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.decision.deadline import decision_wait_text
from ..engine.conclusion.outcome import budget, conclude, full_runs
from ..engine.ledger.records import bundle_line
from ..engine.ledger.state import PERSON_STOPS
from ..engine.conclusion.verdict import Verdict, verdict_of


@dataclass(frozen=True)
class Ending:
    verdict: Verdict
    accepted: int
    unit: str
    per_deliverable_usd: float | None
    incurred_usd: float
    causes: tuple[str, ...]  # why runs were not accepted (shown when none was)
    bundle: str | None  # relative to the campaign folder
    verified: bool
    window_left_s: float | None
    decision_wait: str | None = None  # "GPUs idle waiting for a decision: ..." per lot
    failed_only: bool = False  # none accepted because runs failed, not an honest "no"
    store: object | None = None  # tui.store.status.MirrorStatus with [store]: what is off the box
    retried: str = ""  # the attempts hiccups cost (`[retry]`), counted against the result

    @property
    def budget_text(self) -> str:
        if self.per_deliverable_usd is not None:
            return (f"{self.per_deliverable_usd:.2f} USD per accepted {self.unit} "
                    f"({self.accepted} accepted, {self.incurred_usd:.2f} USD incurred)")
        why = "; ".join(self.causes[:3]) or "no full run was accepted"
        return (f"no accepted {self.unit}: cost per {self.unit} undefined; "
                f"{self.incurred_usd:.2f} USD incurred ({why})")

    def lines(self) -> list[str]:
        out = [f"verdict: {self.verdict.text}", f"budget: {self.budget_text}"]
        out += [f"budget: {self.retried}"] if self.retried else []
        out += [f"not accepted: {cause}" for cause in self.causes]
        if self.bundle:
            out.append(bundle_line(self.bundle, self.verified))
        out += self.store_lines()
        if self.decision_wait:
            out.append(self.decision_wait)
        return out

    def store_lines(self) -> list[str]:
        """What is off the box and where the bundle is there (with [store])."""
        if self.store is None:
            return []
        out = [self.store.text()]
        b = self.store.bundle
        if b is not None:
            out.append(f"bundle at the store: {b.url} "
                       + ("(verified there: every file read back and hashed)" if b.verified
                          else f"(NOT verified there: {'; '.join(b.failures[:3])})"))
        return out

    def to_dict(self) -> dict:
        return {"verdict": self.verdict.kind, "reason": self.verdict.reason,
                "accepted": self.accepted, "unit": self.unit,
                "per_deliverable_usd": self.per_deliverable_usd,
                "incurred_usd": self.incurred_usd, "causes": list(self.causes),
                "bundle": self.bundle, "verified": self.verified,
                "window_left_s": self.window_left_s, "decision_wait": self.decision_wait,
                "failed_only": self.failed_only,
                "store": self.store.to_dict() if self.store is not None else None}


def ending_of(plan, state, now: float, conclusion=None) -> Ending:
    runs_dir = plan.state_dir / "runs"
    wrap, window_end = state.wrapup, state.window_end
    merged = fleet_view(plan, state)
    if merged is not None:  # the first box after merging the other boxes' parts
        (state, runs_dir), conclusion = merged, None
    conclusion = conclusion or conclude(plan, state, runs_dir)
    b = budget(plan, state, runs_dir)
    verdict = verdict_of(plan, state, conclusion)
    failed = [r for r in full_runs(state) if r.stop is None or r.stop.rule not in PERSON_STOPS]
    return Ending(verdict, len(b.accepted), b.unit,
                  b.per_deliverable_usd, b.incurred_usd,
                  tuple(f"{r.run_id}: {r.cause}" for r in b.rejections),
                  wrap.bundle if wrap else None, bool(wrap and wrap.verified),
                  None if window_end is None else window_end - now,
                  decision_wait_text(plan, state),
                  failed_only=not b.accepted and verdict.kind != "no" and bool(failed),
                  store=_stored(plan), retried=b.retried_text())


def _stored(plan):
    """The mirror's last word (.itera/store.json), with [store]."""
    if getattr(plan, "store", None) is None:
        return None
    from ..store.status import read_status

    return read_status(plan.state_dir)


def fleet_view(plan, state):
    """(state, run directories) of every box's runs, once this box has merged the others'
    parts (a campaign over several boxes, after its wrap-up); None otherwise. The one
    home of "the fleet's state": the ending, the room and `status` all read it."""
    from ..campaign.boxes import is_multi_box

    if state.wrapup is None or not is_multi_box(plan):
        return None
    from ..bundle.merge import merged_view

    return merged_view(plan)
