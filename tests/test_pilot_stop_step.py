"""The stop shown at the decision point is the step where the rule fired (issue 34, 12).

A pilot that goes NaN at step 30 and ignores SIGTERM prints on through its
grace (the engine's fake processes play printer.py: tests/fakeprocs.py): the decision point's figures (the ledger's `decision_pending`, read by
`status --json`, the notices and a room without a live view) said the last
step printed, 80 or so, instead of 30, where the rule fired, and the figure
beside it was read at that later step too.
"""

from types import SimpleNamespace

import pytest

from enginekit import printer_cmd, write_plan
from fakeprocs import FakeClock, FakeProcesses, tick_until
from tui.app.pilot_figures import pilot_rows
from tui.campaign import load_plan
from tui.engine import Engine
from tui.engine.conclusion.outcome import figure_bound, final_metric
from tui.notify.notices import pilot_line

def test_a_pilot_stopped_by_a_rule_shows_the_step_the_rule_fired_at(tmp_path):
    path = write_plan(tmp_path, f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--steps", "400")}
    minutes = 1

    [[variant]]
    id = "b"
    category = "useful"
    command = {printer_cmd("--steps", "400", "--nan-at", "30", "--ignore-sigterm")}
    minutes = 1
    """, '[[stop]]\nrule = "non_finite"\n', gpus=2,
        pilot='[pilot]\nsteps = 100\ndecide = "ask"\n')
    clock = FakeClock()  # the engine's fake processes and clocks (tests/fakeprocs.py)
    procs = FakeProcesses(clock)
    engine = Engine(load_plan(path), poll_interval=0.05, clock=clock.wall,
                    monotonic=clock.mono, processes=procs).open()
    try:
        tick_until(engine, procs, clock, lambda: engine.state.decision_pending is not None,
                   "the decision point")
        state, views = engine.state, engine.snapshot().live
    finally:
        engine.close()
    (b,) = state.runs_of("b", "pilot")
    assert b.stop.rule == "non_finite" and b.stop.step == 30
    assert views[b.id].past_bound > 0  # it printed on through its grace (SIGTERM ignored)
    figures = state.decision_pending.pilot
    assert figures["b"]["step"] == 30, figures["b"]
    # and its figure is the one at the stop: acc at step 30 of 100, not at step 80 or so,
    # at the decision point and in the report alike
    assert figures["b"]["metric"] == pytest.approx(0.65)
    assert final_metric(engine.plan, tmp_path / ".itera" / "runs" / b.id,
                        figure_bound(b)) == pytest.approx(0.65)
    assert figures["control"]["step"] == 100  # a pilot ended at its bound: its last step
    room = SimpleNamespace(state=state, engine=SimpleNamespace(live=views))
    rows = {r.variant: r for r in pilot_rows(engine.plan, state.decision_pending, room)}
    assert rows["b"].step == 30 and rows["control"].step == 100
    no_view = SimpleNamespace(state=state, engine=SimpleNamespace(live={}))
    assert {r.variant: r.step for r in pilot_rows(engine.plan, state.decision_pending,
                                                  no_view)} == {"control": 100, "b": 30}
    assert "b STOPPED (non_finite at step 30)" in pilot_line(engine.plan, figures)
