"""What the campaign concluded and what it cost per accepted deliverable.

Shared by `status`, the control room and the bundle report so the three never
disagree. A run is an accepted deliverable when it is a full run that
completed (no stop rule, exit 0) and produced every file the plan's
`[deliverables]` names; repeats of one configuration count once. The decision
compares each variant's final metric with the control's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..campaign.plan import Plan
from ..campaign.pricing import Rejection, deliverable_budget, plan_cost
from .feed import recorded_sources
from .scheduler import blocking_steps
from .state import CampaignState, RunState


def final_metric(plan: Plan, run_dir: Path) -> float | None:
    """The last finite value of the decision metric a run reported.

    Read through the same feeds as the engine (SDK JSONL first, then stdout
    through the `[metrics]` regexes) so a script that only prints counts too.
    """
    metric = plan.campaign.metric
    for records in recorded_sources(run_dir, plan.metrics):
        value = None
        for record in records:
            v = record.get(metric)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                value = float(v)
        if value is not None:
            return value
    return None


def missing_deliverables(plan: Plan, run_dir: Path) -> list[str]:
    missing = []
    for name in plan.deliverables.files:
        path = run_dir / name
        if not path.is_file() or path.stat().st_size == 0:
            missing.append(name)
    return missing


def full_runs(state: CampaignState) -> list[RunState]:
    return [r for r in state.runs if r.kind == "run"]


def _why(run: RunState) -> str:
    return run.why_ended


def rejection_cause(plan: Plan, run: RunState, run_dir: Path) -> str | None:
    if run.state == "running":
        return "still running"
    if run.stop is not None:
        return f"stopped by {run.stop.rule}: {run.stop.reason}"
    if run.state != "completed":
        return f"failed (exit {run.exit_code})"
    missing = missing_deliverables(plan, run_dir)
    if missing:
        return f"missing deliverables: {', '.join(missing)}"
    return None


def budget(plan: Plan, state: CampaignState, runs_dir: Path):
    accepted, rejections = [], []
    for run in full_runs(state):
        cause = rejection_cause(plan, run, runs_dir / run.id)
        if cause is None:
            accepted.append(f"{run.target}:{run.config_hash}")
        else:
            rejections.append(Rejection(run.id, cause))
    for step in blocking_steps(plan, state):  # the cause that stopped everything else
        rejections.append(Rejection(step.id, f"{step.target} {step.state} before the pilot: "
                                    + _why(step)))
    if not full_runs(state) and not rejections:
        rejections.append(Rejection("-", "no full run was made"))
    cost = plan_cost(plan)
    return deliverable_budget(cost.lots, cost.expenses, accepted, rejections,
                              unit=plan.deliverables.unit)


@dataclass(frozen=True)
class Conclusion:
    text: str
    winners: tuple[str, ...]
    control_value: float | None
    values: dict  # variant -> final metric of its full run
    conclusive: bool

    @property
    def headline(self) -> str:
        """A few words for a header line; `text` has the figures."""
        if not self.conclusive:
            return "inconclusive: " + self.text.split("(", 1)[-1].rstrip(")")
        if self.winners:
            return f"{', '.join(self.winners)} meet{'s' if len(self.winners) == 1 else ''} the bar"
        return "no variant meets the bar"

    def to_dict(self) -> dict:
        return {"text": self.text, "headline": self.headline, "winners": list(self.winners),
                "control_value": self.control_value, "values": self.values,
                "conclusive": self.conclusive}


def conclude(plan: Plan, state: CampaignState, runs_dir: Path) -> Conclusion:
    c = plan.campaign
    sign = 1 if c.direction == "max" else -1
    values: dict[str, float | None] = {}
    for run in full_runs(state):
        if run.state == "completed" and run.stop is None:
            values[run.target] = final_metric(plan, runs_dir / run.id)
    control = values.get(c.control)
    if control is None:
        if c.control in values:
            why = f"the control reported no {c.metric}"
        else:
            blocked = blocking_steps(plan, state)
            why = next((rejection_cause(plan, r, runs_dir / r.id) for r in full_runs(state)
                        if r.target == c.control), None) or (
                f"blocked: {blocked[0].target} {blocked[0].state}, {_why(blocked[0])}"
                if blocked else "the control has not run")
        return Conclusion(f"inconclusive: no completed control ({why})", (), None, values,
                          False)
    winners, best = [], None
    for vid, value in values.items():
        if vid == c.control or value is None:
            continue
        gain = sign * (value - control)
        meets_bound = c.threshold is None or sign * (value - c.threshold) >= 0
        if gain >= c.min_gain - 1e-6 and meets_bound:  # float32-logged metrics
            winners.append(vid)
        if best is None or gain > best[1]:
            best = (vid, gain, value)
    bound = f" and {c.metric} {'>=' if sign > 0 else '<='} {c.threshold:g}" \
        if c.threshold is not None else ""
    if winners:
        parts = [f"{v} ({c.metric} {values[v]:.4g} vs control {control:.4g})" for v in winners]
        text = (f"{', '.join(parts)} meet{'s' if len(winners) == 1 else ''} the threshold: "
                f"gain >= {c.min_gain:g}{bound}")
    elif best is not None:
        text = (f"no variant meets the threshold against the control ({c.metric} "
                f"{control:.4g}); best {best[0]} {best[2]:.4g}, gain {best[1]:+.4g} "
                f"< {c.min_gain:g}{bound}")
    else:
        text = (f"no variant completed to compare with the control ({c.metric} "
                f"{control:.4g})")
    return Conclusion(text, tuple(winners), control, values, True)
