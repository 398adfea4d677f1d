"""Re-estimation after the pilot accounts for loading and validation."""

import sys

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
