"""Re-estimation after the pilot accounts for loading and validation.

The script (tests/scripts/slow_start.py) sleeps fixed amounts, and on a loaded box
time only grows: the test bounds each part from below by what the script sleeps,
and from above by the records' own timestamps (the parts must add up to the pilot's
launch-to-exit time in the ledger), never by the wall clock of the test.
"""

import json
import sys

import pytest

from enginekit import drive, write_plan
from tui.campaign import load_plan
from tui.engine.estimate import estimates, measure_pilot, project
from tui.engine.ledger.file import read_ledger
from tui.engine.ledger.state import replay

# what slow_start.py sleeps: loading, 3 slow first steps, warm steps, each 10th step's
# validation pass, the output writing after the last record
LOAD_S, SLOW_STEP_S, WARM_STEP_S, VALIDATION_S, TAIL_S = 0.6, 0.15, 0.01, 0.2, 0.3
TOL = 0.002  # the ledger keeps times to the ms; float timestamps near 1.7e9 s to ~1e-6 s


def metric_records(run_dir):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return sorted((json.loads(line) for line in lines), key=lambda r: r["t"])


@pytest.mark.slow
def test_pilot_estimate_counts_loading_and_validation_not_just_warm_steps(tmp_path):
    from conftest import REPO

    command = repr([sys.executable, str(REPO / "tests/scripts/slow_start.py")]).replace("'", '"')
    variants = f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {command}
    minutes = 1
    steps = 200
    """
    path = write_plan(tmp_path, variants, pilot='[pilot]\nsteps = 30\ndecide = "continue"\n')
    # a long grace: the pilot honours ITERA_MAX_STEPS and ends by itself, its tail
    # intact, however slow the box (no SIGTERM cuts the 0.3 s of output writing)
    path.write_text(path.read_text().replace("grace_seconds = 1.0", "grace_seconds = 120.0"))
    drive(path, timeout=300)  # a hang guard only: the run takes ~12 s on a quiet box
    plan = load_plan(path)
    state = replay(read_ledger(plan.state_dir / "ledger.jsonl"))
    runs_dir = plan.state_dir / "runs"
    pilot = next(r for r in state.runs if r.kind == "pilot")
    full = next(r for r in state.runs if r.kind == "run")
    assert pilot.state == "completed" and full.state == "completed"
    est = estimates(plan, state, runs_dir)["control"]
    m = est.measure
    assert m.steps == 30 and m.validations == 3 and m.checkpoints == 0

    # each part is at least what the script slept in it
    assert m.startup_s >= LOAD_S + SLOW_STEP_S - TOL  # the first record comes after step 1
    assert m.validation_s >= 3 * VALIDATION_S - TOL
    assert m.train_s >= 2 * SLOW_STEP_S + 27 * WARM_STEP_S - TOL  # steps 2..30
    assert m.tail_s >= TAIL_S - TOL
    # and exactly what the records' own timestamps say: the parts partition the pilot
    records = metric_records(runs_dir / pilot.id)
    assert m.startup_s == pytest.approx(records[0]["t"] - pilot.launched_t)
    before_validation = [b["t"] - a["t"] for a, b in zip(records, records[1:]) if "acc" in b]
    assert len(before_validation) == 3
    assert m.validation_s == pytest.approx(sum(before_validation))
    assert m.tail_s == pytest.approx(pilot.ended_t - records[-1]["t"])
    assert m.startup_s + m.train_s + m.validation_s + m.tail_s == pytest.approx(
        pilot.ended_t - pilot.launched_t)

    # the full run: start-up and tail once, training and validation scaled 200/30
    scale = 200 / 30
    assert est.seconds == pytest.approx(
        m.startup_s + m.train_s * scale + m.validation_s * scale + m.tail_s)
    assert est.warm_seconds == pytest.approx(200 * m.warm_step_s)
    assert m.warm_step_s >= WARM_STEP_S - TOL
    # what the warm extrapolation leaves out: start-up, 20 validation passes, the tail
    fixed_est = est.seconds - 200 * m.step_s
    assert fixed_est >= LOAD_S + SLOW_STEP_S + 20 * VALIDATION_S + TAIL_S - TOL

    # the full run, decomposed the same way from its own records, had those fixed costs:
    # 20 validation passes as predicted, and fixed seconds that the estimate is closer
    # to than the warm extrapolation (which counts none of them)
    f = measure_pilot(plan, full, runs_dir / full.id)
    assert f.steps == 200 and f.validations == m.validations * scale == 20
    fixed_full = f.startup_s + f.validation_s + f.tail_s
    assert fixed_full >= LOAD_S + SLOW_STEP_S + 20 * VALIDATION_S + TAIL_S - TOL
    assert abs(fixed_est - fixed_full) < fixed_full

    # the projection at the full run's end pins what was observed and adds the planned
    # wrap-up and retrieval; the frozen plan keeps its own 1-minute run and pilot
    c = plan.campaign
    proj = project(plan, state, runs_dir, now=full.ended_t)
    assert proj.projected_end_t == pytest.approx(
        full.ended_t + (c.wrapup_hours + c.retrieval_hours) * 3600, abs=0.01)
    pilot_planned_s = 60 * 30 / 200  # 30 of the run's 200 steps of its planned minute
    assert proj.planned_end_t == pytest.approx(
        proj.window_start_t + pilot_planned_s + plan.pilot.decision_hours * 3600 + 60
        + (c.wrapup_hours + c.retrieval_hours) * 3600, abs=0.01)


def test_retrieval_after_wrapup_uses_the_measured_bundle_size(tmp_path):
    from tui.engine.estimate import retrieval_hours

    path = write_plan(tmp_path, """
    [[variant]]
    id = "control"
    category = "mandatory"
    command = ["true"]
    minutes = 1
    """)
    plan = load_plan(path)
    t0 = 1_764_500_000.0
    events = [{"seq": 1, "t": t0, "event": "window_started", "start": t0, "end": t0 + 3600,
               "hours": 1.0},
              {"seq": 2, "t": t0 + 600, "event": "wrapup_started"},
              {"seq": 3, "t": t0 + 700, "event": "wrapup_done", "bundle": "outputs/bundle",
               "verified": True, "failures": 0, "bytes": 1_000_000_000}]
    state = replay(events)
    proj = project(plan, state, plan.state_dir / "runs", now=t0 + 800)
    # 1 GB at the default 100 Mb/s is 80 s of retrieval, still to come after now
    assert retrieval_hours(1_000_000_000, 100.0) * 3600 == 80.0
    assert proj.projected_end_t == pytest.approx(t0 + 800 + 80.0, abs=0.05)
    # the frozen plan keeps its own figures: the 1-minute run, then 3 min of wrap-up and
    # 3 min of retrieval (the defaults, 5 % of this 1-hour window), not the 80 s measured
    c = plan.campaign
    assert (c.wrapup_hours, c.retrieval_hours) == (0.05, 0.05)
    assert proj.planned_end_t == pytest.approx(t0 + 60 + 180 + 180, abs=0.01)
