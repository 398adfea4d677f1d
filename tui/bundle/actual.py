"""Planned vs actual, from the frozen plan and the ledger (the plan is never rewritten).

The calendar of the frozen plan says what was reserved; the ledger says what
happened: first launch to last exit, hours per variant, and every deviation
with its cause (a stop rule, a failure, a drop, a decision, a variant that
never ran). The next campaign starts from these figures.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..campaign.calendar import build_calendar
from ..campaign.loading.sections import rule_label
from ..campaign.plan import Plan
from ..engine.decision.deadline import decision_wait_text
from ..engine.ledger.events import Event, VariantDropped, WarningEvent, WindowStarted
from ..engine.ledger.state import CampaignState, RunState
from ..campaign.units import human_hours as duration
from ..campaign.units import told_apart


def utc(t: float | None) -> str:
    if t is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(t))


def hours(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / 3600.0


def fmt_h(value: float | None) -> str:
    """Hours in human units (the one formatter, campaign.units)."""
    return duration(value)


def run_seconds(run: RunState) -> float | None:
    if run.launched_t is None or run.ended_t is None:
        return None
    return max(0.0, run.ended_t - run.launched_t)


@dataclass(frozen=True)
class TargetRow:
    target: str
    category: str
    kind: str  # variant | step
    planned_pilot_h: float | None
    observed_pilot_h: float | None
    planned_h: float
    observed_h: float | None
    outcome: str


@dataclass(frozen=True)
class PlannedVsActual:
    window_hours: float
    calendar_hours: float
    calendar_fits: bool
    window_start: float | None
    window_end: float | None
    first_launch: float | None
    last_exit: float | None
    observed_hours: float | None
    rows: tuple[TargetRow, ...]
    deviations: tuple[tuple[float | None, str], ...]  # (time, text), in time order
    decisions: tuple  # tui.engine.ledger.records.TakenDecision
    retrieval_hours: float
    decision_wait: str | None = None  # "GPUs idle waiting for a decision: ..." (per lot)
    decision_planned_hours: float | None = None  # the calendar's decision interval
    # (start, hours) of each rental: the plan's window, then each box the campaign moved to
    rentals: tuple[tuple[float | None, float], ...] = ()
    moves: tuple = ()  # the ledger's moves (records.Move): each new box's lot and its price

    @property
    def campaign_start(self) -> float | None:
        """T+0 of every offset: the first rental's start (after a move, the window in the
        state is the new box's, which begins after the first launch)."""
        return self.rentals[0][0] if self.rentals else self.window_start

    @property
    def reserved_hours(self) -> float:
        return sum(h for _, h in self.rentals) if self.rentals else self.window_hours


def compare(plan: Plan, state: CampaignState, events: list[dict]) -> PlannedVsActual:
    calendar = build_calendar(plan)
    planned_task = {e.id: e.task.hours for e in calendar.entries}
    launches = [r.launched_t for r in state.runs if r.launched_t is not None]
    exits = [r.ended_t for r in state.runs if r.ended_t is not None]
    first, last = (min(launches) if launches else None), (max(exits) if exits else None)
    rows = [_variant_row(plan, state, v, planned_task) for v in plan.variants]
    rows += [_step_row(state, s) for s in plan.steps if s.who == "machine" and s.command]
    retrieval = planned_task.get("retrieval", plan.campaign.retrieval_hours)
    return PlannedVsActual(
        window_hours=plan.window_hours, calendar_hours=calendar.end_to_end_hours,
        calendar_fits=calendar.fits, window_start=state.window_start,
        window_end=state.window_end, first_launch=first, last_exit=last,
        observed_hours=hours(last - first) if first is not None and last is not None else None,
        rows=tuple(rows), deviations=tuple(_deviations(plan, state, events)),
        decisions=tuple(state.decisions), retrieval_hours=retrieval,
        decision_wait=decision_wait_text(plan, state),
        decision_planned_hours=planned_task.get("decision"),
        rentals=_rentals(plan, state, events), moves=tuple(state.moves))


def _rentals(plan: Plan, state: CampaignState, events: list[Event]):
    """The first window as the ledger started it, then each move's new rental."""
    started = next((e for e in events if isinstance(e, WindowStarted)), None)
    first = started.start if started else None
    if not state.moves:
        first = state.window_start if first is None else first
    return ((first, plan.window_hours),) + tuple((m.t, m.window_hours) for m in state.moves)


def _observed(runs: list[RunState]) -> float | None:
    secs = [s for s in (run_seconds(r) for r in runs) if s is not None]
    return hours(sum(secs)) if secs else None


def _outcome(runs: list[RunState], dropped: bool) -> str:
    if not runs:
        return "dropped" if dropped else "never ran"
    last = runs[-1]
    if last.stop is not None and last.state == "stopped":
        return f"stopped ({rule_label(last.stop.rule)})"
    if last.state == "failed":
        return f"failed (exit {last.exit_code})"
    return last.state


def _variant_row(plan, state, variant, planned_task) -> TargetRow:
    pilots = state.runs_of(variant.id, "pilot")
    runs = state.runs_of(variant.id, "run")
    return TargetRow(variant.id, variant.category, "variant",
                     planned_task.get(f"pilot:{variant.id}"), _observed(pilots),
                     variant.hours, _observed(runs),
                     _outcome(runs, variant.id in state.dropped))


def _step_row(state, step) -> TargetRow:
    runs = [r for r in state.runs if r.target == step.id and r.kind in ("step", "post")]
    return TargetRow(step.id, "mandatory", "step", None, None, step.hours, _observed(runs),
                     _outcome(runs, False))


def _deviations(plan: Plan, state: CampaignState, events: list[dict]):
    out: list[tuple[float | None, str]] = []
    for run in state.runs:
        if run.stop is not None and run.stop.rule not in ("pilot", "pilot_bound"):
            where = f" at step {run.stop.step}" if run.stop.step is not None else ""
            value = (f" (value {run.stop.value})" if run.stop.value is not None
                     else "")
            out.append((run.stop.t, f"{run.id} ({run.kind}) stopped by "
                        f"{rule_label(run.stop.rule)}{where}: {run.stop.reason}{value}"))
        elif run.state == "failed":
            out.append((run.ended_t, f"{run.id} ({run.kind}) failed with exit status "
                        f"{run.exit_code}"))
        elif run.state == "running":
            out.append((None, f"{run.id} ({run.kind}) was still running at wrap-up"))
        if run.kind == "run" and run.state == "completed" and run.stop is None:
            planned = _planned_hours(plan, run.target)
            observed = hours(run_seconds(run))
            if planned and observed is not None and abs(observed - planned) > 0.25 * planned:
                took, meant = told_apart(observed * 3600.0, planned * 3600.0)
                out.append((run.ended_t, f"{run.id} took {took} for {meant} planned "
                            f"({(observed / planned - 1):+.0%})"))
    for ev in events:
        if isinstance(ev, VariantDropped):
            out.append((ev.t, f"variant {ev.variant} dropped ({ev.reason_text})"))
        elif isinstance(ev, WarningEvent):
            out.append((ev.t, f"warning: {ev.message}"))
    for d in state.decisions:
        note = f" — {d.note}" if d.note else ""
        out.append((d.t, f"decision: {d.said}{note}"))
    ran = {r.target for r in state.runs if r.kind == "run"}
    for v in plan.variants:
        if v.id not in ran and v.id not in state.dropped:
            cause = ("wrap-up decided at the decision point"
                     if any(d.decision == "wrapup" for d in state.decisions)
                     else "not reached before the wrap-up")
            out.append((None, f"variant {v.id} ({v.category}) never ran: {cause}"))
    return sorted(out, key=lambda item: (item[0] is None, item[0] or 0.0))


def _planned_hours(plan: Plan, target: str) -> float | None:
    try:
        return plan.variant(target).hours
    except KeyError:
        return None
