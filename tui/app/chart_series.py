"""Which curves the chart shows: the selected run's (or all runs'), and the bounds.

A pure function of the plan, a snapshot and the chart's toggles, so what the
chart plots is tested without textual; `chart_model.py` draws it. With all
runs shown, the live ones come first (in the legend too, so a `+2` never
hides them) and the rest are the latest that ran. A run that diverged is
clipped by the bundle figures' own rule (`tui.campaign.divergence`): its
clipped values never set the scale, and a ▲ at the top edge marks where
its clipped stretch starts, with the value in its legend entry.
"""

from __future__ import annotations

import math

from ..campaign.divergence import clip_diverged
from ..engine.ledger.state import TERMINAL
from .rows import TRAINING_KINDS, run_label
from .widgets.chart import ChartModel

MAX_CHART_SERIES = 6


def _shown(room, all_runs: bool, row) -> list:
    live = room.engine.live
    if not all_runs:
        return [r for r in room.state.runs
                if row is not None and r.id == row.run_id and r.id in live]
    charted = [r for r in room.state.runs if r.id in live and r.kind in TRAINING_KINDS]
    alive = [r for r in charted if r.alive]
    rest = [r for r in charted if not r.alive]
    return (alive + rest[::-1])[:MAX_CHART_SERIES]


def chart_model(plan, room, row, all_runs: bool, quality: bool) -> ChartModel:
    metric = plan.campaign.metric if quality else "loss"
    live = room.engine.live
    runs = _shown(room, all_runs, row)
    if all_runs:
        title = f"{metric} · all runs"
    else:
        title = f"{metric} · {row.label if row else 'no run'}"
        if row is not None and row.run_id is None:
            title += " · not started"
    raw = {}
    for r in runs:
        view = live[r.id]
        points = view.metric_history if quality else view.loss_history
        raw[r.id] = [(float(x), float(y)) for x, y in points
                     if isinstance(x, (int, float)) and isinstance(y, (int, float))]
    clipped = clip_diverged(raw)
    series, marks = [], []
    for i, r in enumerate(runs):
        c = clipped[r.id]
        label = run_label(r.kind, r.target, r.attempt)
        if c.starts:
            label += f" ▲{c.starts[0][1]}"
            marks += [(i, x) for x, _ in c.starts]
        series.append((label, tuple((x, math.nan if y is None else y) for x, y in c.points)))
    diverged = tuple(i for i, r in enumerate(runs) if clipped[r.id].starts)
    return ChartModel(title, tuple(series), thresholds(plan, metric, [r.target for r in runs]),
                      clip_marks=tuple(marks),
                      unscaled=diverged if len(diverged) < len(runs) else (),
                      empty=_empty(metric, quality, series, [live[r.id] for r in runs],
                                   over=bool(runs) and all(r.state in TERMINAL for r in runs)))


def _empty(metric: str, quality: bool, series: list, views: list, over: bool = False) -> str:
    """What an empty chart says: waiting for records, or, once records came (the runs
    table shows their step and loss), which value none of them has held yet. Once the
    runs it shows are over (a pilot a rule stopped before its first evaluation) there
    is no "yet": it says they ended without one."""
    name = metric if quality else "loss"
    yet = "" if over else " yet"
    if any(math.isfinite(y) for _, points in series for _, y in points):
        return ""  # something to draw: never said
    if any(points for _, points in series):
        return f"no finite {name} value{yet} (NaN or inf only)"
    if not any(v.records for v in views):
        return "no record: it ended before its first" if over \
            else "waiting for the first record…"
    if quality:
        when = "ended before they evaluated" if over else "report it when they evaluate"
        return f"no {metric} value{yet}: the runs {when} (m: the loss chart)"
    return f"no {name} value in the records" + ("" if over else " read so far")


def thresholds(plan, metric: str, targets: list[str]) -> tuple:
    """(value, label) of every stop-rule bound and the campaign threshold on `metric`."""
    out = []
    for rule in plan.stops:
        if rule.rule != "threshold" or rule.metric != metric:
            continue
        if targets and not any(rule.applies_to(t) for t in targets):
            continue
        bound = rule.below if rule.below is not None else rule.above
        label = f"stop {'<' if rule.below is not None else '>'}"
        if bound is not None and (bound, label) not in out:
            out.append((bound, label))
    c = plan.campaign
    if metric == c.metric and c.threshold is not None:
        out.append((c.threshold, "threshold"))
    return tuple(out)
