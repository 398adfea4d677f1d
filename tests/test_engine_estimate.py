"""Re-estimation after the pilot accounts for loading and validation."""

import sys

import pytest

from enginekit import drive, write_plan
from tui.campaign import load_plan
from tui.engine.estimate import estimates, project
from tui.engine.ledger import read_ledger
from tui.engine.state import replay


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
    drive(path, timeout=90)
    plan = load_plan(path)
    state = replay(read_ledger(plan.state_dir / "ledger.jsonl"))
    est = estimates(plan, state, plan.state_dir / "runs")["control"]
    m = est.measure
    assert m.steps == 30 and m.validations == 3
    # timings on a loaded 2-core box only grow: bound them from below, and loosely above
    assert 0.55 <= m.startup_s < 3.0  # interpreter start + 0.6 s of loading
    assert 0.55 <= m.validation_s < 2.0  # three 0.2 s validation passes
    assert 0.25 <= m.tail_s < 2.0  # 0.3 s of output writing
    # full run truth: 0.6 load + 0.45 slow steps + 197*0.01 + 20*0.2 validation + 0.3
    assert est.seconds >= 0.6 + 0.45 + 1.97 + 4.0 + 0.3 - 0.5
    assert est.warm_seconds < 0.5 * est.seconds  # the warm extrapolation misses most of it
    # and the measured full run agrees with the estimate, not the warm extrapolation
    full = next(r for r in state.runs if r.kind == "run")
    observed = full.ended_t - full.launched_t
    assert abs(observed - est.seconds) < 0.35 * observed
    assert abs(observed - est.seconds) < abs(observed - est.warm_seconds)
    proj = project(plan, state, plan.state_dir / "runs", now=full.ended_t)
    assert proj.projected_end_t is not None and proj.planned_end_t is not None
    assert proj.projected_end_t != proj.planned_end_t


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
    events = [{"seq": 1, "t": t0, "event": "window_started", "start": t0, "end": t0 + 3600},
              {"seq": 2, "t": t0 + 600, "event": "wrapup_started"},
              {"seq": 3, "t": t0 + 700, "event": "wrapup_done", "bundle": "outputs/bundle",
               "verified": True, "failures": 0, "bytes": 1_000_000_000}]
    state = replay(events)
    proj = project(plan, state, plan.state_dir / "runs", now=t0 + 800)
    # 1 GB at the default 100 Mb/s is 80 s of retrieval, still to come after now
    assert retrieval_hours(1_000_000_000, 100.0) * 3600 == 80.0
    assert proj.projected_end_t == pytest.approx(t0 + 800 + 80.0, abs=0.05)
    planned_retrieval = plan.campaign.retrieval_hours * 3600  # 15 min in the frozen plan
    assert proj.planned_end_t - proj.window_start_t > planned_retrieval
