"""Which curves the chart shows: the selected run's (or all runs'), and the bounds.

A pure function of the plan, a snapshot and the chart's toggles, so what the
chart plots is tested without textual; `chart_model.py` draws it.
"""

from __future__ import annotations

from .rows import run_label
from .widgets.chart import ChartModel

MAX_CHART_SERIES = 6


def chart_model(plan, room, row, all_runs: bool, quality: bool) -> ChartModel:
    metric = plan.campaign.metric if quality else "loss"
    live = room.engine.live
    if all_runs:
        runs = [r for r in room.state.runs if r.id in live][-MAX_CHART_SERIES:]
        title = f"{metric} · all runs"
    else:
        runs = [r for r in room.state.runs
                if row is not None and r.id == row.run_id and r.id in live]
        title = f"{metric} · {row.label if row else 'no run'}"
        if row is not None and row.run_id is None:
            title += " · not started"
    series = []
    for r in runs:
        view = live[r.id]
        points = view.metric_history if quality else view.loss_history
        series.append((run_label(r.kind, r.target, r.attempt), tuple(points)))
    return ChartModel(title, tuple(series), thresholds(plan, metric, [r.target for r in runs]))


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
