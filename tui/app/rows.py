"""The runs table as data: one row per run, and one per run still to come.

Rows follow the calendar order (checks, pilots, runs, post steps) so the table
reads like the plan; a task not launched yet is a 'queued' (or 'dropped') row.
One rule for every figure a person compares: the decision metric shown is the
run's last (final) value, as the conclusion and the report use it (the best is
kept apart, labelled `best`), and the step of a run a rule stopped is the step
the rule fired at, as its stop reason says. Pure functions of the plan and a
snapshot, tested without textual.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..campaign.calendar import Calendar
from ..campaign.loading.sections import rule_label
from ..campaign.plan import Plan
from ..engine.ledger.state import PILOT_ENDS
from ..engine.views import KIND_WORD, run_label  # noqa: F401 - one home: the CLI reads it too
from . import format as fmt

CATEGORY_SHORT = {"mandatory": "man", "useful": "use", "exploratory": "exp"}


def labels_of(state) -> dict[str, str]:
    """Run id -> label, for every run the ledger knows."""
    return {r.id: run_label(r.kind, r.target, r.attempt) for r in state.runs}


def final_value(view, metric: str) -> float | None:
    """The run's last finite value of `metric` (what the conclusion compares)."""
    return None if view is None else view.final_metric


def shown_step(run, view) -> int | None:
    """The step every view shows: where a rule stopped the run, else the last one seen."""
    if run is not None and run.rule_step is not None:
        return run.rule_step
    return view.last_step if view is not None else None


TRAINING_KINDS = ("pilot", "run")  # what has a loss curve; steps (a data check) do not


@dataclass(frozen=True)
class RunRow:
    """One row of the runs table: a run, or a task still to come."""
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
    loss: float | None
    metric: float | None  # the decision metric's last value
    best: float | None  # its best value, shown apart
    checkpoint: str
    stop_text: str
    label: str = ""

    @property
    def alive(self) -> bool:
        return self.state in ("running", "stopping")

    @property
    def task(self) -> tuple[str, str]:
        return (self.kind, self.target)


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
                               planned_steps(plan, kind, target), None, "", None, None, None,
                               "—", "", run_label(kind, target)))
    for key, runs in by_task.items():  # runs the calendar does not know (plan changed)
        if key not in seen:
            rows.extend(_row(plan, r, snapshot.live.get(r.id), now) for r in runs)
    return rows


def planned_steps(plan: Plan, kind: str, target: str) -> int | None:
    try:
        steps = plan.variant(target).steps
    except KeyError:
        return None
    if kind == "pilot" and plan.pilot and plan.pilot.steps and steps:
        return min(steps, plan.pilot.steps)
    return steps


RULE_SHORT = {"threshold": "thresh", "truncation": "trunc"}


def stop_short(stop, width: int = 6) -> str:
    """'non_finite nan', 'thresh 0.41', 'user': the rule and its value, short."""
    if not stop:
        return ""
    rule = RULE_SHORT.get(stop.rule) or rule_label(stop.rule)
    value = stop.value
    return f"{rule} {fmt.number(value, width)}" if value is not None else rule


def state_text(run, state: str) -> str:
    if run.stop and run.stop.rule in PILOT_ENDS and state == "completed":
        return "✓ done"  # a pilot stopped at its bound ends by design
    if run.stop:
        return f"✕ {stop_short(run.stop)}"
    if state == "stopping":
        return "stopping"
    if state == "completed":
        return "✓ done"
    if state == "failed":  # ↻: a hiccup `[retry]` relaunches (the next row is the retry)
        return f"✕ exit {run.exit_code}" + (" ↻" if run.retried else "")
    if state == "cut":  # its box went away mid-run: continued by a later attempt
        return "cut (box gone)"
    return state


def _row(plan: Plan, run, view, now: float) -> RunRow:
    total = run.max_steps or planned_steps(plan, run.kind, run.target)
    step = shown_step(run, view)
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
    metric = plan.campaign.metric
    return RunRow(run.id, run.id, run.target, run.kind, run.category, state,
                  state_text(run, state), step, total, fraction, eta,
                  view.last_loss if view else None, final_value(view, metric),
                  view.best_metric if view else None, checkpoint_text(run, now),
                  stop_reason(run), run_label(run.kind, run.target, run.attempt))


def checkpoint_text(run, now: float) -> str:
    """Age of the last acknowledged checkpoint: '4 min✓' verified, '?' pending, '✗' failed."""
    if not run.checkpoints:
        return "—"
    last = run.checkpoints[-1]
    age = fmt.duration(max(0.0, now - last.t))
    return f"{age}{verification_mark(run, last)}"


def verification_mark(run, ack) -> str:
    """✓ verified, ✗ failed, ? waiting; ↻ the trainer rotated it away unread, ↷ saved over
    in place before its turn (neither is a failure)."""
    verdict = run.verdict_of(ack)
    if verdict is None and ack.path in getattr(run, "rotated", ()):
        return "↻"
    if verdict is None and run.saved_over(ack):
        return "↷"
    return "?" if verdict is None else ("✓" if verdict.ok else "✗")


def stop_reason(run) -> str:
    if run.stop:
        return f"{run.stop.rule}: {run.stop.reason}"
    if run.stop_requested:
        return f"stop requested ({run.stop_requested.by}: {run.stop_requested.reason})"
    return run.retry_text  # `[retry]`: a retry, a failure retried, a hiccup left


def kept_selection(old_rows, rows, selected: str | None, follow: bool = False) -> str | None:
    """The selection after the rows changed: the same row while it exists; when a
    queued row became a run, that run; else the row now at the same place. At the
    start (nothing selected yet) one is chosen: the first live training run (a pilot
    or a full run: a data check has no curve), else the first live row, else the
    latest run that ran (a finished campaign opens on its last full run). `follow`:
    no key has moved the selection yet, so it goes on to the first live training run
    while the one it started on (a data check, a finished pilot) is not one."""
    keys = [r.key for r in rows]
    if not rows:
        return None
    training = [r.key for r in rows if r.alive and r.kind in TRAINING_KINDS]
    if selected in keys:
        if follow and training and selected not in training:
            return training[0]
        return selected
    previous = next((r for r in old_rows if r.key == selected), None)
    if previous is None:
        alive = [r.key for r in rows if r.alive]
        ran = [r.key for r in rows if r.run_id is not None]
        return (training or alive or [ran[-1] if ran else keys[0]])[0]
    same_task = [r.key for r in rows if r.task == previous.task]
    if same_task:
        return same_task[-1]
    index = [r.key for r in old_rows].index(selected)
    return keys[min(index, len(keys) - 1)]
