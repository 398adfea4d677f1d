"""The runs table as data: one row per run, and one per run still to come.

Rows follow the calendar order (checks, pilots, runs, post steps) so the table
reads like the plan; a task not launched yet is a 'queued' (or 'dropped') row.
Pure functions of the plan and a snapshot, tested without textual.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..campaign.calendar import Calendar
from ..campaign.plan import Plan
from . import format as fmt

CATEGORY_SHORT = {"mandatory": "man", "useful": "use", "exploratory": "exp"}


@dataclass(frozen=True)
class RunRow:
    key: str  # run id, or "queued:<kind>:<target>"
    run_id: str | None
    target: str
    kind: str
    category: str
    state: str  # queued | running | completed | stopped | dropped | failed | stopping
    state_text: str
    step: int | None
    total: int | None
    fraction: float | None
    eta: str
    loss: str
    best: str
    checkpoint: str
    stop_text: str

    @property
    def alive(self) -> bool:
        return self.state in ("running", "stopping")

    @property
    def label(self) -> str:
        return self.run_id or f"{self.target} ({self.kind})"


def _task_key(kind: str, target: str) -> str:
    return f"pilot:{target}" if kind == "pilot" else target


def engine_tasks(plan: Plan, calendar: Calendar) -> list[tuple[str, str, str]]:
    """(kind, target, category) of every task the engine launches, in calendar order."""
    out = []
    for e in calendar.entries:
        t = e.task
        if t.kind == "pilot":
            out.append(("pilot", t.id.split(":", 1)[1], t.category or ""))
        elif t.kind == "run":
            out.append(("run", t.id, t.category or ""))
        elif t.kind in ("step", "post"):
            step = plan.step(t.id)
            if step.who == "machine" and step.command:
                out.append((t.kind, t.id, "mandatory"))
    return out


def run_rows(plan: Plan, calendar: Calendar, snapshot, now: float) -> list[RunRow]:
    state = snapshot.state
    by_task: dict[str, list] = {}
    for run in state.runs:
        by_task.setdefault(_task_key(run.kind, run.target), []).append(run)
    rows: list[RunRow] = []
    seen = set()
    for kind, target, category in engine_tasks(plan, calendar):
        key = _task_key(kind, target)
        seen.add(key)
        runs = by_task.get(key, [])
        for run in runs:
            rows.append(_row(plan, run, snapshot.live.get(run.id), now))
        if not runs:
            dropped = target in state.dropped
            rows.append(RunRow(f"queued:{kind}:{target}", None, target, kind, category,
                               "dropped" if dropped else "queued",
                               "dropped" if dropped else "queued", None,
                               _planned_steps(plan, kind, target), None, "", "—", "—", "—",
                               ""))
    for key, runs in by_task.items():  # runs the calendar does not know (plan changed)
        if key not in seen:
            rows.extend(_row(plan, r, snapshot.live.get(r.id), now) for r in runs)
    return rows


def _planned_steps(plan: Plan, kind: str, target: str) -> int | None:
    try:
        steps = plan.variant(target).steps
    except KeyError:
        return None
    if kind == "pilot" and plan.pilot and plan.pilot.steps and steps:
        return min(steps, plan.pilot.steps)
    return steps


RULE_SHORT = {"threshold": "thresh", "truncation": "trunc"}


def stop_short(stop) -> str:
    """'non_finite nan', 'thresh 0.123', 'user': the rule and its value, short."""
    if not stop:
        return ""
    rule = RULE_SHORT.get(stop.rule, stop.rule)
    value = stop.value
    if isinstance(value, float):
        value = f"{value:.3g}"
    return f"{rule} {fmt.number(value)}" if value is not None else rule


def _row(plan: Plan, run, view, now: float) -> RunRow:
    total = run.max_steps or _planned_steps(plan, run.kind, run.target)
    step = view.last_step if view else None
    fraction = (step / total) if (step is not None and total) else None
    state = run.state
    if state == "running" and run.stop_requested:
        state = "stopping"
    eta = ""
    if state == "running" and step and total and view and view.last_record_t \
            and run.launched_t is not None:
        elapsed = view.last_record_t - run.launched_t
        if elapsed > 0 and step < total:
            eta = fmt.duration((total - step) * elapsed / step)
    if run.stop:
        state_text = f"✕ {stop_short(run.stop)}"
    elif state == "stopping":
        state_text = "stopping"
    elif state == "completed":
        state_text = "✓ done"
    elif state == "failed":
        state_text = f"✕ exit {run.exit_code}"
    else:
        state_text = state
    return RunRow(run.id, run.id, run.target, run.kind, run.category, state, state_text,
                  step, total, fraction, eta, fmt.number(view.last_loss) if view else "—",
                  fmt.number(view.best_metric) if view else "—", checkpoint_text(run, now),
                  _stop_reason(run))


def checkpoint_text(run, now: float) -> str:
    """Age of the last acknowledged checkpoint: '4m✓' verified, '4m?' pending, '4m✗' failed."""
    if not run.checkpoints:
        return "—"
    last = run.checkpoints[-1]
    age = fmt.duration(max(0.0, now - last.t))
    verdict = next((v for v in reversed(run.verified) if v.path == last.path), None)
    mark = "?" if verdict is None else ("✓" if verdict.ok else "✗")
    return f"{age}{mark}"


def _stop_reason(run) -> str:
    if run.stop:
        return f"{run.stop.rule}: {run.stop.reason}"
    if run.stop_requested:
        return f"stop requested ({run.stop_requested.by}: {run.stop_requested.reason})"
    return ""
