"""The decision point's figures, as the modal and the drop picker show them.

One rule with the rest of the room: the decision metric is each pilot's last
(final) value, read from the engine's live view (the ledger's frozen figure
is a best value and is used only when no view exists), and the step of a
stopped pilot is the step its rule fired at. A variant whose pilot an
announced stop rule ended is suggested for dropping, with the rule.
The table fits its width by dropping whole columns, never by cutting a cell.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.decision.pilots import continue_warning
from ..engine.conclusion.verdict import ANSWERING_STOPS
from . import format as fmt
from .rows import CATEGORY_SHORT, final_value, shown_step, stop_short

GAP = " "


@dataclass(frozen=True)
class PilotRow:
    variant: str
    category: str
    state: str
    step: int | None
    loss: float | None
    metric: float | None
    verdict: str
    mark: str | None  # why it is suggested for dropping
    problem: str | None = None  # failed / no metric / a rule, in words (engine.pilots)
    crash: tuple[str, ...] = ()  # a crashed pilot's last stderr lines


def gain_verdict(plan, value, control_value) -> str:
    """'gain +0.015 meets' / 'gain -0.002 below' / 'misses threshold' (pilot figures)."""
    c = plan.campaign
    if value is None:
        return "no metric"
    sign = 1 if c.direction == "max" else -1
    if c.threshold is not None and sign * (value - c.threshold) < 0:
        return "misses threshold"
    if control_value is None:
        return "—"
    gain = sign * (value - control_value)
    return f"gain {gain:+.4g} " + ("meets" if gain >= c.min_gain - 1e-12 else "below")


def pilot_rows(plan, pending, room) -> list[PilotRow]:
    state = room.state
    live = room.engine.live
    metric = plan.campaign.metric
    figures: dict[str, tuple] = {}
    for v in plan.variants:
        fig = pending.pilot.get(v.id)
        if fig is None:
            continue
        run = next((r for r in state.runs if r.id == fig.get("run")), None)
        view = live.get(fig.get("run"))
        value = final_value(view, metric) if view is not None else fig.get("metric")
        step = shown_step(run, view) if (run or view) else None
        if step is None:  # no live view: the ledger's figure (the rule's step, too)
            step = fig.get("step")
        loss = view.last_loss if view is not None else fig.get("last_loss")
        figures[v.id] = (run, fig, step, loss, value)
    control = figures.get(plan.campaign.control, (None,) * 5)[4]
    rows = []
    for v in plan.variants:
        if v.id not in figures:
            rows.append(PilotRow(v.id, v.category, "no pilot", None, None, None, "", None))
            continue
        run, fig, step, loss, value = figures[v.id]
        stop = run.stop if run is not None else None
        state_word = f"✕ {stop_short(stop)}" if stop else (
            "✕ failed" if fig.get("state") == "failed" else fig.get("state") or "")
        mark = None
        if stop is not None and stop.rule in ANSWERING_STOPS:
            said = f" {fmt.number(stop.value)}" if stop.value is not None else ""
            mark = f"pilot stopped by {stop.rule}{said}"
        verdict = "control" if v.id == plan.campaign.control \
            else gain_verdict(plan, value, control)
        crash = fig.get("crash")
        rows.append(PilotRow(v.id, v.category, state_word, step, loss, value, verdict, mark,
                             fig.get("problem") if isinstance(fig.get("problem"), str)
                             else None, tuple(str(x) for x in crash)
                             if isinstance(crash, list) else ()))
    return rows


def pilot_table(plan, rows: list[PilotRow], width: int) -> str:
    """Columns: variant, state, metric, verdict always; loss, step, category as room allows."""
    metric = plan.campaign.metric
    cols = [
        ("variant", "variant", [r.variant for r in rows], False),
        ("cat", "cat", [CATEGORY_SHORT.get(r.category, r.category[:3]) for r in rows], False),
        ("state", "state", [r.state for r in rows], False),
        ("step", "step", ["" if r.step is None else str(r.step) for r in rows], True),
        ("loss", "loss", [fmt.number(r.loss) if r.state != "no pilot" else "" for r in rows],
         True),
        ("metric", metric, [fmt.number(r.metric) if r.state != "no pilot" else ""
                            for r in rows], True),
        ("verdict", "verdict", [r.verdict for r in rows], False),
    ]
    widths = {key: max([len(title)] + [len(c) for c in cells]) for key, title, cells, _ in cols}
    keep = [key for key, *_ in cols]
    for key in ("cat", "step", "loss"):  # the first to go when the width is short
        if sum(widths[k] for k in keep) + len(GAP) * (len(keep) - 1) <= width:
            break
        keep.remove(key)
    lines = []
    for i in range(-1, len(rows)):
        cells = []
        for key, title, values, right in cols:
            if key not in keep:
                continue
            text = title if i < 0 else values[i]
            cells.append(text.rjust(widths[key]) if right else text.ljust(widths[key]))
        lines.append(GAP.join(cells).rstrip())
    return "\n".join(lines)


def problem_lines(plan, rows: list[PilotRow], pending) -> list[str]:
    """Each pilot that is not a figure to compare, with why (a crash with its last stderr
    line), then the warning "continue" carries when the control's pilot failed."""
    out = [f"{r.variant}: {r.problem}" for r in rows if r.problem]
    warning = continue_warning(plan, pending.pilot)
    if warning:
        out.append(f"⚠ continue: {warning}")
    return out


def suggestion_lines(rows: list[PilotRow]) -> list[str]:
    marked = [r for r in rows if r.mark and r.category != "mandatory"]
    if not marked:
        return []
    names = ", ".join(f"{r.variant} ({r.mark})" for r in marked)
    return [f"suggested drop: {names}; [d] opens the picker with "
            f"{'it' if len(marked) == 1 else 'them'} marked"]
