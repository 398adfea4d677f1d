"""What the campaign concluded and what it cost per accepted deliverable.

Shared by `status`, the control room and the bundle report so the three never
disagree. A run is an accepted deliverable when it is a full run that
completed (no stop rule, exit 0), whose numbers are finite (no watched metric
was NaN or infinite in any record, and its last decision-metric value is
finite: a script can exit 0 after training into NaN) and that produced every
file the plan's `[deliverables]` names; repeats of one configuration count
once. The decision compares each variant's final metric with the control's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..campaign.numbers import is_finite_number, is_number
from ..campaign.plan import Plan
from ..campaign.pricing import Rejection, deliverable_budget, plan_cost
from .feed import recorded_sources
from .rules import where
from .scheduler import blocking_steps
from .state import CampaignState, RunState


@dataclass(frozen=True)
class Readout:
    """What a run's records say about it once it has ended."""

    final_metric: float | None  # the last finite value of the decision metric
    non_finite: str | None  # why its numbers cannot be accepted, if they cannot


def watched_metrics(plan: Plan, target: str) -> tuple[str, ...]:
    """What `non_finite` watches for this run; with no such rule, the `[metrics]` default."""
    names: list[str] = []
    for rule in plan.stops:
        if rule.rule == "non_finite" and rule.applies_to(target):
            names += [n for n in rule.metrics if n not in names]
    return tuple(names) or plan.metrics.watch


def read_run(plan: Plan, run_dir: Path, target: str | None = None) -> Readout:
    """Read a run's records once (through the engine's own feeds: SDK JSONL, then the
    printed streams through `[metrics]`, then TensorBoard) for its final figures."""
    metric = plan.campaign.metric
    watched = watched_metrics(plan, target) if target is not None else plan.metrics.watch
    final = None
    last = None  # the last value of the decision metric in the first source that has one
    cause = None
    for records in recorded_sources(run_dir, plan.metrics, frozenset(watched) | {metric}):
        value = source_last = None
        for record in records:
            if cause is None and "event" not in record:
                for name in watched:
                    v = record.get(name)
                    if v.__class__ is float and not math.isfinite(v):
                        cause = f"{name} was {v} {where(record)}"
                        break
            v = record.get(metric)
            if is_number(v):
                source_last = v
                if is_finite_number(v):
                    value = float(v)
        if last is None and source_last is not None:
            last = source_last
        if final is None and value is not None:
            final = value
    if cause is None and last is not None and not is_finite_number(last):
        cause = f"its last {metric} is {last}"
    return Readout(final, None if cause is None else f"non-finite numbers: {cause}")


def final_metric(plan: Plan, run_dir: Path) -> float | None:
    """The last finite value of the decision metric a run reported."""
    return read_run(plan, run_dir).final_metric


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
    readout = read_run(plan, run_dir, run.target)
    if readout.non_finite:
        return readout.non_finite
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
            readout = read_run(plan, runs_dir / run.id, run.target)
            if readout.non_finite is None:  # a NaN-trained model compares with nothing
                values[run.target] = readout.final_metric
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
        text = (f"{', '.join(parts)} meet{'s' if len(winners) == 1 else ''} the bar: "
                f"gain >= {c.min_gain:g}{bound}")
    elif best is not None:
        text = (f"no variant meets the bar against the control ({c.metric} "
                f"{control:.4g}); best {best[0]} {best[2]:.4g}, gain {best[1]:+.4g} "
                f"< {c.min_gain:g}{bound}")
    else:
        text = (f"no variant completed to compare with the control ({c.metric} "
                f"{control:.4g})")
    return Conclusion(text, tuple(winners), control, values, True)
