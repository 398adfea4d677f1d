"""The all-runs chart is not scaled by a diverged run's early values, and its step axis
ends where the runs table's step column does (issue 36, item 13)."""

from __future__ import annotations

import math
from types import SimpleNamespace

from tui.app.chart_model import render_chart
from tui.app.chart_series import chart_model
from tui.service.histories import WIRE_POINTS, envelope


def _room(histories):
    runs = [SimpleNamespace(id=rid, kind="run", target=rid, attempt=1, alive=False,
                           state="completed")
            for rid in histories]
    live = {rid: SimpleNamespace(loss_history=tuple(points), metric_history=())
            for rid, points in histories.items()}
    return SimpleNamespace(state=SimpleNamespace(runs=runs),
                           engine=SimpleNamespace(live=live))


def test_a_diverged_run_s_early_climb_does_not_set_the_all_runs_scale():
    plan = SimpleNamespace(campaign=SimpleNamespace(metric="acc", threshold=None), stops=())
    control = [(s, 2.0 - s / 100) for s in range(1, 101)]
    hot = [(s, 2.0 * 1.5 ** s) for s in range(1, 30)] + [(30, math.nan)]  # 4e5 then NaN
    model = chart_model(plan, _room({"control": control, "hot": hot}), None, True, False)
    hot_at = [label.split()[0] for label, _ in model.series].index("hot·run")
    assert model.unscaled == (hot_at,)  # hot diverged: clipped from its NaN on
    grid = render_chart([pts for _, pts in model.series], [], 60, 12,
                        clip_marks=model.clip_marks, unscaled=model.unscaled)
    assert grid.y_max < 2.5, grid.y_max  # the control's range, readable
    assert grid.x_max == 100


def test_the_wire_envelope_keeps_the_last_step_the_table_shows():
    points = tuple((s, 1.0 + (s % 7) / 10) for s in range(1, 5001))
    cut = envelope(points)
    assert len(cut) <= WIRE_POINTS
    assert cut[0] == points[0] and cut[-1] == points[-1]  # the axis ends at step 5000
    xs = [x for x, _ in cut]
    assert xs == sorted(xs)
