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

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from ...campaign.loading.sections import rule_label
from ...campaign.numbers import is_finite_number, is_number
from ...campaign.plan import Plan
from ...campaign.pricing import (Rejection, RetriedAttempt, deliverable_budget, lot_share_usd,
                                 plan_cost)
from ..rules import first_non_finite, where
from ..scheduler import blocking_steps
from ..ledger.records import Readout
from ..ledger.state import CampaignState, RunState
from .crash import failure_cause
from .delivered import BEST_MODEL_EVENT, DeliveredModel

if TYPE_CHECKING:  # the feed readers are the engine's: not loaded for the room's paint
    from ..reading.feeds import FeedKind


NON_FINITE = "non-finite numbers"
LINK = "a symbolic link, not a file of the run directory"
READOUT_CHARS = 300  # of a non-finite cause, in the ledger
STEP_VALUES = 100_000  # (kind, step) -> metric values kept for a delivered best checkpoint


def watched_metrics(plan: Plan, target: str) -> tuple[str, ...]:
    """What `non_finite` watches for this run; with no such rule, the `[metrics]` default."""
    names: list[str] = []
    for rule in plan.stops:
        if rule.rule == "non_finite" and rule.applies_to(target):
            names += [n for n in rule.metrics if n not in names]
    return tuple(names) or plan.metrics.watch


def figure_bound(run: RunState) -> int | None:
    """The global step a run's figures stop at: a pilot's bound (its `max_steps`), or the
    step a rule stopped it at when that is sooner, so the decision point, the report and
    the bundle show one figure, not what a script that ignored the bound (or SIGTERM)
    printed after it; None for every other run."""
    if run.kind != "pilot":
        return None
    steps = [s for s in (run.max_steps, run.rule_step) if s is not None]
    return min(steps) if steps else None


def _past(record: dict, bound: int | None) -> bool:
    """Whether a record lies past `bound` (its global step, as the live view counts it)."""
    if bound is None:
        return False
    step = record.get("global_step", record.get("step"))
    return is_number(step) and step > bound


class ReadoutFold:
    """A run's `Readout`, folded record by record: one home for what its records say.

    `read_run` folds every record a run wrote, after the fact; the live engine folds the
    same records as it reads them and writes the result into `run_exited` (`to_fields`),
    so `status`, the room and the report judge a run that flooded gigabytes of output
    from a few ledger bytes instead of reading it all again. Records are folded per
    kind of source (`FeedKind`: the SDK JSONL, the printed streams, TensorBoard); the
    first kind that has the decision metric gives its final value."""

    def __init__(self, metric: str, watched: tuple[str, ...], bound: int | None = None):
        self.metric = metric
        self.watched = tuple(watched)
        self.bound = bound  # `figure_bound`: records past it are not the run's figures
        self.cause: str | None = None
        self._last: dict[FeedKind, object] = {}  # kind -> last numeric value of the metric
        self._final: dict[FeedKind, float] = {}  # kind -> last finite value of the metric
        self.delivered: DeliveredModel | None = None  # HF load_best_model_at_end
        self.at: dict[tuple[FeedKind, int], float] = {}  # (kind, step) -> finite metric value

    def values(self, kind: FeedKind) -> tuple[object, float | None]:
        """(last numeric, last finite) value of the metric in the records of `kind` so far."""
        return self._last.get(kind), self._final.get(kind)

    def keep(self, kind: FeedKind, cause: str | None, last, final: float | None) -> None:
        """What a batch of `kind` left: the fold of `add`, or of the live engine's one
        loop (`RunLive._ingest`, which folds the same records the same way as it reads
        them, in the loop that feeds its view: one pass over each batch, not two)."""
        self.cause = cause
        if last is not None:
            self._last[kind] = last
        if final is not None:
            self._final[kind] = final

    def deliver(self, record: dict) -> None:
        """A `BEST_MODEL_EVENT` record: the model the run delivers, if it names one."""
        self.delivered = DeliveredModel.from_record(record) or self.delivered

    def deliver_from_files(self, run_dir: Path) -> None:
        """A run whose records named no delivered model (an HF script without the
        callback): the one its checkpoint folders name, unless past the figures' bound.
        Once the run has ended: HF writes the last checkpoint's state before reloading."""
        if self.delivered is None:
            found = DeliveredModel.from_run_files(run_dir)
            if found is not None and not _past({"global_step": found.step}, self.bound):
                self.delivered = found

    def add(self, kind: FeedKind, records) -> None:
        metric, watched = self.metric, self.watched
        cause, (last, final) = self.cause, self.values(kind)
        bound, at = self.bound, self.at
        for record in records:
            if bound is not None and _past(record, bound):
                continue
            if record.get("event") == BEST_MODEL_EVENT:
                self.deliver(record)
                continue
            if cause is None and "event" not in record:
                name = first_non_finite(record, watched)  # the rules' own test
                if name is not None:
                    cause = f"{name} was {record[name]} {where(record)}"
            v = record.get(metric)
            if is_number(v):
                last = v
                if is_finite_number(v):
                    final = float(v)
                    step = record.get("global_step", record.get("step"))
                    if "event" not in record and isinstance(step, int) and (
                            len(at) < STEP_VALUES or (kind, step) in at):
                        at[(kind, step)] = final
        self.keep(kind, cause, last, final)

    def readout(self) -> Readout:
        last = next((self._last[k] for k in sorted(self._last)), None)
        final = next((self._final[k] for k in sorted(self._final)), None)
        cause = self.cause
        if cause is None and last is not None and not is_finite_number(last):
            cause = f"its last {self.metric} is {last}"
        delivered = self.delivered
        if delivered is not None:  # the figure of the model the run delivers, or none:
            # the trainer's own best_metric first (a printed dict rounds it to 4 digits)
            final = delivered.value if delivered.metric == self.metric else None
            if final is None:
                final = next((self.at[(k, delivered.step)] for k in sorted(self._last)
                              if (k, delivered.step) in self.at), None)
        return Readout(final, None if cause is None else f"{NON_FINITE}: {cause}",
                       delivered=delivered)

    def to_fields(self) -> dict:
        """The readout as `run_exited` carries it (`RunState.readout` reads it back)."""
        readout = self.readout()
        return {"final_metric": readout.final_metric,
                "non_finite": None if readout.non_finite is None
                else readout.non_finite[:READOUT_CHARS]} | (
                    readout.delivered.to_fields() if readout.delivered else {})


def read_run(plan: Plan, run_dir: Path, target: str | None = None,
             bound: int | None = None) -> Readout:
    """Read a run's records once (through the engine's own feeds: SDK JSONL, then the
    printed streams through `[metrics]`, then TensorBoard) for its final figures; with
    `bound` (`figure_bound`), only the records up to that step."""
    metric = plan.campaign.metric
    watched = watched_metrics(plan, target) if target is not None else plan.metrics.watch
    from ..reading.feeds import recorded_sources  # the engine's feeds: not the room's paint

    fold = ReadoutFold(metric, watched, bound)
    for records in recorded_sources(run_dir, plan.metrics, frozenset(watched) | {metric}):
        fold.add(records.kind, records)
    fold.deliver_from_files(run_dir)
    return fold.readout()


def readout_of(plan: Plan, run: RunState, run_dir: Path) -> Readout:
    """What the engine folded while the run lived (in its `run_exited`): judging a run is
    bounded by the ledger, not by the gigabytes a run may print. Only a ledger from
    before the fold (no readout in `run_exited`) has the run's records read again."""
    bound = figure_bound(run)  # a pilot: its figures end at its bound, read from its files
    if run.readout is not None and bound is None:
        return run.readout
    return read_run(plan, run_dir, run.target, bound)


def produced_records(plan: Plan, run_dir: Path) -> bool:
    """Whether a run wrote any metrics record at all (an event alone is none): a run
    stopped before its first one trained on nothing and answers nothing. Reads up to
    the first record only."""
    from ..reading.feeds import recorded_sources

    for records in recorded_sources(run_dir, plan.metrics):
        for record in records:
            if "event" not in record:
                return True
    return False


def final_metric(plan: Plan, run_dir: Path, bound: int | None = None) -> float | None:
    """The last finite value of the decision metric a run reported (up to `bound`)."""
    return read_run(plan, run_dir, bound=bound).final_metric


@dataclass(frozen=True)
class DeliverableProblem:
    """Why one file the plan's `[deliverables]` names does not count for a run."""

    name: str
    problem: str  # "missing", "empty", "a symbolic link", ...

    @property
    def missing(self) -> bool:
        return self.problem in ("missing", "empty")

    def text(self) -> str:
        return f"{self.name} ({self.problem})"


def deliverable_problem(run_dir: Path, name: str) -> str | None:
    """None when `name` is a non-empty regular file inside `run_dir`, reached through no
    symbolic link (lstat at every step): a link is what the run controls, and it may point
    anywhere (another run's file, the box's disk), so the bundle cannot hold what it
    names. Otherwise why not, in a few words."""
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or ".." in parts:
        return "not a path inside the run directory"
    path = Path(run_dir)
    for i, part in enumerate(parts):
        path = path / part
        try:
            info = os.lstat(path)
        except OSError:
            return "missing"
        if stat.S_ISLNK(info.st_mode):
            return LINK
        last = i == len(parts) - 1
        if not last and not stat.S_ISDIR(info.st_mode):
            return "missing"
        if last and not stat.S_ISREG(info.st_mode):
            return "not a regular file"
        if last and info.st_size == 0:
            return "empty"
    return None


def deliverable_problems(plan: Plan, run_dir: Path) -> list[DeliverableProblem]:
    """Each declared deliverable that does not count, with why (one per name)."""
    out = []
    for name in plan.deliverables.files:
        problem = deliverable_problem(run_dir, name)
        if problem is not None:
            out.append(DeliverableProblem(name, problem))
    return out


def missing_deliverables(plan: Plan, run_dir: Path) -> list[str]:
    return [p.name for p in deliverable_problems(plan, run_dir)]


def full_runs(state: CampaignState) -> list[RunState]:
    return [r for r in state.runs if r.kind == "run"]


def _why(run: RunState) -> str:
    return run.why_ended


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


STILL_RUNNING = "still running"  # not judged yet, not refused: `status` says it apart


def _rejection(plan: Plan, run: RunState, run_dir: Path, unverified: dict) -> str | None:
    if run.state == "running":
        return STILL_RUNNING
    if run.stop is not None:
        return f"stopped by {rule_label(run.stop.rule)}: {run.stop.reason}"
    if run.state == "cut":
        return "cut: its box went away mid-run (not continued yet)"
    if run.state != "completed":
        said = failure_cause(run_dir)
        return f"failed (exit {run.exit_code})" + (f": {said}" if said else "")
    readout = readout_of(plan, run, run_dir)
    if readout.non_finite:
        return readout.non_finite
    if readout.final_metric is None:
        return f"no {plan.campaign.metric} value was reported"
    problems = deliverable_problems(plan, run_dir)
    if problems and all(p.missing for p in problems):
        return f"missing deliverables: {', '.join(p.name for p in problems)}"
    if problems:  # a link, a FIFO, a folder: named, so nobody goes looking for a model
        return f"deliverables not accepted: {', '.join(p.text() for p in problems)}"
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
    continued = {r.resumes for r in state.runs if r.resumes}
    for run in full_runs(state):
        if run.id in continued:
            continue  # cut by its box, continued by a later attempt: judged there
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
    # each box the campaign moved to is a second rental (`itera-tui resume`), counted
    return deliverable_budget(cost.lots + moved_rental(state), cost.expenses, accepted,
                              rejections, unit=plan.deliverables.unit,
                              retried=retried_attempts(plan, state))


def retried_attempts(plan: Plan, state: CampaignState) -> list[RetriedAttempt]:
    """Every attempt a hiccup ended and `[retry]` relaunched, with the GPU time it held
    (its lanes, launch to exit) and that time's share of its lot's price."""
    lots = {lot.id: lot for lot in plan.lots}
    out = []
    for run in state.runs:
        if not run.retried or run.launched_t is None or run.ended_t is None:
            continue
        gpu_h = len(run.lanes) * max(0.0, run.ended_t - run.launched_t) / 3600
        lot = lots.get(run.lot)
        out.append(RetriedAttempt(run.id, run.retried, round(gpu_h, 6),
                                  lot_share_usd(lot, gpu_h) if lot is not None else 0.0))
    return out


def moved_rental(state: CampaignState) -> float:
    """What the boxes the campaign moved to cost (their rentals, as `resume` was told)."""
    return sum(move.price_usd for move in state.moves)


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


def bar_words(plan: Plan) -> str:
    """The bar in words, the same wherever it is shown (the decision point, the
    verdict, the report): "gain >= 0.02 and val_acc >= 0.85". The gain is counted in
    the metric's better direction (a lower val_loss is a positive gain), so it is
    ">=" whatever the direction; only the threshold's sign follows the direction."""
    c = plan.campaign
    bound = (f" and {c.metric} {'>=' if c.direction == 'max' else '<='} {c.threshold:g}"
             if c.threshold is not None else "")
    return f"gain >= {c.min_gain:g}{bound}"


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


def _in_queue_order(plan: Plan, values: dict) -> dict:
    """The variants in the order the queue launches them (category, then priority), not
    the order their runs happen to be in the ledger: a campaign continued on another box
    (its cut runs relaunched after runs that finished) reads the same as a whole one."""
    from ...campaign.plan import CATEGORY_RANK

    rank = {v.id: (CATEGORY_RANK[v.category], v.priority, i)
            for i, v in enumerate(plan.variants)}
    return dict(sorted(values.items(), key=lambda kv: rank.get(kv[0], (99, 0, 0))))


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
            values[run.target] = readout_of(plan, run, runs_dir / run.id).final_metric
        elif run.target == c.control:
            control_reason = f"{run.id}: {judged.reason}"
    values = _in_queue_order(plan, values)
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
    if winners:
        parts = [f"{v} ({c.metric} {values[v]:.4g} vs control {control:.4g})" for v in winners]
        text = (f"{', '.join(parts)} meet{'s' if len(winners) == 1 else ''} the bar: "
                f"{bar_words(plan)}")
    elif best is not None:
        text = (f"no variant meets the bar against the control ({c.metric} "
                f"{control:.4g}); best {best[0]} {best[2]:.4g}, "
                f"{missed_bar(plan, best[2], control)}")
    else:
        text = (f"no variant completed to compare with the control ({c.metric} "
                f"{control:.4g})")
    return Conclusion(text, tuple(winners), control, values, True)
