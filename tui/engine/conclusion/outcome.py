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

from ...campaign.numbers import is_finite_number, is_number
from ...campaign.plan import Plan
from ...campaign.pricing import Rejection, deliverable_budget, plan_cost
from ..reading.feeds import recorded_sources
from ..rules import where
from ..scheduler import blocking_steps
from ..ledger.state import CampaignState, RunState
from .delivered import BEST_MODEL_EVENT, DeliveredModel


NON_FINITE = "non-finite numbers"


@dataclass(frozen=True)
class Readout:
    """What a run's records say about it once it has ended."""

    final_metric: float | None  # the last finite value of the decision metric, or the
    # delivered model's when training reloaded a best checkpoint at its end (delivered.py)
    non_finite: str | None  # why its numbers cannot be accepted, if they cannot
    delivered: DeliveredModel | None = None


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
    delivered = None
    for records in recorded_sources(run_dir, plan.metrics, frozenset(watched) | {metric}):
        value = source_last = None
        for record in records:
            if record.get("event") == BEST_MODEL_EVENT:
                delivered = DeliveredModel.from_record(record) or delivered
                continue
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
    if delivered is not None:
        final = _delivered_figure(plan, run_dir, delivered, metric)
    return Readout(final, None if cause is None else f"{NON_FINITE}: {cause}", delivered)


def _delivered_figure(plan: Plan, run_dir: Path, delivered: DeliveredModel,
                      metric: str) -> float | None:
    """The decision metric of the model the run delivers: its value at the delivered
    checkpoint's step (or the best metric itself, when that is the decision metric).
    None (no figure) rather than another step's: a figure of a model nobody has."""
    if delivered.step is not None:
        for records in recorded_sources(run_dir, plan.metrics, frozenset({metric})):
            value = None
            for record in records:
                v = record.get(metric)
                if "event" not in record and record.get("step") == delivered.step \
                        and is_finite_number(v):
                    value = float(v)
            if value is not None:
                return value
    return delivered.value if delivered.metric == metric else None


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


TAIL_BYTES = 4096


def last_error_lines(run_dir: Path, n: int = 2) -> list[str]:
    """The last non-empty lines of a run's stderr (its crash, usually), read from the
    file's end only and with control characters dropped: text a run controls is never
    printed raw."""
    try:
        with open(run_dir / "stderr.log", "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - TAIL_BYTES))
            data = f.read(TAIL_BYTES)
    except OSError:
        return []
    text = data.decode("utf-8", "replace").replace("\r", "\n")
    lines = ["".join(ch for ch in line if ch.isprintable()).strip()[:200]
             for line in text.split("\n")]
    return [line for line in lines if line][-n:]


def unverified_of(state: CampaignState) -> dict[str, str]:
    """run id -> why one of its deliverables did not verify, as the last bundle found."""
    return dict(state.wrapup.unverified) if state.wrapup else {}


@dataclass(frozen=True)
class Acceptance:
    """Whether one full run counts as a deliverable and, when it does not, why: the one
    wording `status`, the room, the ending and the report all show."""

    run_id: str
    target: str
    reason: str | None  # None: accepted
    diverged: bool = False  # rejected for non-finite numbers: an answer for its variant

    @property
    def accepted(self) -> bool:
        return self.reason is None


def acceptance(plan: Plan, run: RunState, run_dir: Path,
               unverified: dict[str, str] | None = None) -> Acceptance:
    """The one place that decides what counts. A full run is accepted only when it
    completed (exit 0, no stop), its decision metric has a finite last value, no watched
    metric was non-finite in any record, and every declared deliverable exists in its run
    directory and verified (`unverified`: run id -> the bundle check's failure)."""
    reason = _rejection(plan, run, run_dir, unverified or {})
    return Acceptance(run.id, run.target, reason,
                      reason is not None and reason.startswith(NON_FINITE))


def _rejection(plan: Plan, run: RunState, run_dir: Path, unverified: dict) -> str | None:
    if run.state == "running":
        return "still running"
    if run.stop is not None:
        return f"stopped by {run.stop.rule}: {run.stop.reason}"
    if run.state != "completed":
        said = last_error_lines(run_dir, 1)
        return f"failed (exit {run.exit_code})" + (f": {said[0]}" if said else "")
    readout = read_run(plan, run_dir, run.target)
    if readout.non_finite:
        return readout.non_finite
    if readout.final_metric is None:
        return f"no {plan.campaign.metric} value was reported"
    missing = missing_deliverables(plan, run_dir)
    if missing:
        return f"missing deliverables: {', '.join(missing)}"
    if run.id in unverified:
        return f"deliverable not verified: {unverified[run.id]}"
    return None


def rejection_cause(plan: Plan, run: RunState, run_dir: Path,
                    unverified: dict[str, str] | None = None) -> str | None:
    return acceptance(plan, run, run_dir, unverified).reason


def budget(plan: Plan, state: CampaignState, runs_dir: Path,
           unverified: dict[str, str] | None = None):
    """Cost per accepted deliverable; `unverified` defaults to what the last bundle found."""
    unverified = unverified_of(state) if unverified is None else unverified
    accepted, rejections = [], []
    for run in full_runs(state):
        judged = acceptance(plan, run, runs_dir / run.id, unverified)
        if judged.accepted:
            accepted.append(f"{run.target}:{run.config_hash}")
        else:
            rejections.append(Rejection(run.id, judged.reason))
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


def missed_bar(plan: Plan, value: float, control: float) -> str:
    """Which condition of the bar a value fails, and only that one: the gain, the
    threshold, or both."""
    c = plan.campaign
    sign = 1 if c.direction == "max" else -1
    gain = sign * (value - control)
    failed = []
    if gain < c.min_gain - 1e-6:
        failed.append(f"gain {gain:+.4g} < {c.min_gain:g}")
    if c.threshold is not None and sign * (value - c.threshold) < 0:
        failed.append(f"{c.metric} {value:.4g} {'<' if sign > 0 else '>'} the threshold "
                      f"{c.threshold:g}")
    return " and ".join(failed)


def conclude(plan: Plan, state: CampaignState, runs_dir: Path,
             unverified: dict[str, str] | None = None) -> Conclusion:
    """Compare the accepted full runs (the same judgement as the budget) with the control."""
    c = plan.campaign
    sign = 1 if c.direction == "max" else -1
    unverified = unverified_of(state) if unverified is None else unverified
    values: dict[str, float | None] = {}
    control_reason = None
    for run in full_runs(state):
        judged = acceptance(plan, run, runs_dir / run.id, unverified)
        if judged.accepted:  # a NaN-trained or unverified model compares with nothing
            values[run.target] = read_run(plan, runs_dir / run.id, run.target).final_metric
        elif run.target == c.control:
            control_reason = f"{run.id}: {judged.reason}"
    control = values.get(c.control)
    if control is None:
        blocked = blocking_steps(plan, state)
        if control_reason is not None and c.control not in values:
            why = f"the control's run was not accepted, {control_reason}"
        elif blocked:
            why = f"blocked: {blocked[0].target} {blocked[0].state}, {_why(blocked[0])}"
        else:
            why = "the control has not run"
        return Conclusion(f"inconclusive: no accepted control ({why})", (), None, values,
                          False)
    winners, best = [], None
    for vid, value in values.items():
        if vid == c.control or value is None:
            continue
        gain = sign * (value - control)
        if not missed_bar(plan, value, control):  # float32-logged metrics: 1e-6 slack
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
                f"{control:.4g}); best {best[0]} {best[2]:.4g}, "
                f"{missed_bar(plan, best[2], control)}")
    else:
        text = (f"no variant completed to compare with the control ({c.metric} "
                f"{control:.4g})")
    return Conclusion(text, tuple(winners), control, values, True)
