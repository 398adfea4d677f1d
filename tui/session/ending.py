"""How a campaign ends, as a person reads it: the verdict, the budget, the bundle.

One frozen record for the control room's done screen, the headless run's last
lines and `status`: the same figures everywhere. With no accepted deliverable
the cost per deliverable is undefined: the incurred cost and the causes are
shown instead, never a zero cost.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.outcome import budget, conclude
from ..engine.verdict import Verdict, verdict_of


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
        if self.bundle:
            out.append(f"bundle: {self.bundle} ({'verified' if self.verified else 'NOT verified'})")
        return out

    def to_dict(self) -> dict:
        return {"verdict": self.verdict.kind, "reason": self.verdict.reason,
                "accepted": self.accepted, "unit": self.unit,
                "per_deliverable_usd": self.per_deliverable_usd,
                "incurred_usd": self.incurred_usd, "causes": list(self.causes),
                "bundle": self.bundle, "verified": self.verified,
                "window_left_s": self.window_left_s}


def ending_of(plan, state, now: float, conclusion=None) -> Ending:
    runs_dir = plan.state_dir / "runs"
    wrap, window_end = state.wrapup, state.window_end
    merged = _merged(plan, state)
    if merged is not None:  # the first box after merging the other boxes' parts
        (state, runs_dir), conclusion = merged, None
    conclusion = conclusion or conclude(plan, state, runs_dir)
    b = budget(plan, state, runs_dir)
    return Ending(verdict_of(plan, state, conclusion), len(b.accepted), b.unit,
                  b.per_deliverable_usd, b.incurred_usd,
                  tuple(f"{r.run_id}: {r.cause}" for r in b.rejections),
                  wrap.bundle if wrap else None, bool(wrap and wrap.verified),
                  None if window_end is None else window_end - now)


def _merged(plan, state):
    """Every box's runs, once this box has merged the others' parts (a campaign over
    several boxes, after its wrap-up); None otherwise."""
    from ..campaign.boxes import is_multi_box

    if state.wrapup is None or not is_multi_box(plan):
        return None
    from ..bundle.merge import merged_view

    return merged_view(plan)
