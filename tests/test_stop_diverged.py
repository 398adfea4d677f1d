"""`[[stop]] rule = "diverged"` (issue 41, item 5): a run whose loss exploded but stayed
finite (run_clm at lr 1e3, a loss of ~1e8 to the end) passed `non_finite` and counted as
an accepted model. The rule stops it once its loss is over `factor` times its own first
figures, says so at `check`, and the run is named "diverged" in `status` and the report.
"""

import json
import math

import pytest

from clikit import check
from enginekit import control_only, printer_cmd, write_plan
from fakeprocs import drive_plan
from test_engine_verdict import NO_WIN, completed, full, plan_of, replay, stopped_by
from tui.bundle.actual import compare
from tui.campaign import load_plan
from tui.engine import read_ledger
from tui.campaign.plan import StopRule
from tui.engine.conclusion.verdict import verdict_of
from tui.engine.rules import RuleSet, build

DIVERGED = '[[stop]]\nrule = "diverged"\nfactor = 100\n'


def rules(**kw) -> RuleSet:
    return RuleSet((StopRule("diverged", metric="loss", **kw),), "v", "run")


def test_a_loss_over_factor_times_the_median_of_its_first_figures_stops_the_run():
    rs = rules(factor=100, baseline_records=5)
    assert build(StopRule("diverged", factor=10)).name == "diverged"
    first = [{"t": float(i), "step": i, "loss": v}
             for i, v in enumerate([9.0, 0.5, 2.0, 3.0, 2.5], 1)]  # median 2.5
    assert rs.first_stop(first, 0.0) is None
    grown = [{"t": 10.0, "step": 10, "loss": 250.0},           # exactly 100 x: not over
             {"t": 11.0, "step": 11, "loss": 1e8}]
    stop = rs.first_stop(grown, 99.0)
    assert (stop.rule, stop.value, stop.step, stop.t) == ("diverged", 1e8, 11, 11.0)
    assert stop.reason == ("loss=1e+08 at step 11, over 100 x its baseline 2.5 (the median "
                           "of its first 5 figures): diverged")
    assert stop.to_dict()["value"] == 1e8


def test_no_stop_before_the_baseline_is_set_and_non_finite_values_are_left_to_non_finite():
    rs = rules(factor=10, baseline_records=3)
    assert rs.on_record({"step": 1, "loss": 1.0}, 0.0) is None
    assert rs.on_record({"step": 2, "loss": math.nan}, 0.0) is None   # not a figure
    assert rs.on_record({"step": 3, "loss": 1e9}, 0.0) is None       # still a first figure
    assert rs.on_record({"step": 4, "loss": math.inf}, 0.0) is None
    assert rs.on_record({"step": 5, "loss": 1.0}, 0.0) is None       # baseline: median 1.0
    assert rs.on_record({"step": 6, "acc": 1e9}, 0.0) is None        # another metric
    assert rs.on_record({"event": "checkpoint", "loss": 1e9}, 0.0) is None
    assert rs.on_record({"step": 7, "loss": 10.5}, 0.0).step == 7


def test_a_baseline_at_or_below_zero_is_not_judged_and_each_run_has_its_own():
    negative = rules(factor=2, baseline_records=1)
    negative.on_record({"step": 1, "loss": -3.0}, 0.0)
    assert negative.on_record({"step": 2, "loss": 1e12}, 0.0) is None
    a, b = rules(factor=2, baseline_records=1), rules(factor=2, baseline_records=1)
    a.on_record({"step": 1, "loss": 100.0}, 0.0)
    b.on_record({"step": 1, "loss": 1.0}, 0.0)
    assert a.on_record({"step": 2, "loss": 150.0}, 0.0) is None
    assert b.on_record({"step": 2, "loss": 150.0}, 0.0).rule == "diverged"


def _plan(tmp_path, stop: str):
    return write_plan(tmp_path, control_only(printer_cmd()), stop)


def test_the_loader_reads_its_keys_with_defaults_and_check_explains_it(tmp_path):
    path = _plan(tmp_path, DIVERGED + 'variants = ["control"]\n')
    (rule,) = load_plan(path).stops
    assert (rule.rule, rule.metric, rule.factor, rule.baseline_records) == \
        ("diverged", "loss", 100, 5)
    out = check(str(path))
    assert out.returncode == 0, out.stderr
    assert ("stop rule: diverged (control): loss above 100 x the median of the run's first 5 "
            "finite loss figures stops it, even while it stays finite") in out.stdout
    data = json.loads(check("--json", str(path)).stdout)
    assert len(data["divergence_limits"]) == 1


@pytest.mark.parametrize("extra, said", [
    ('baseline_record = 3\n', 'stop[0].baseline_record: unknown key (did you mean '
                              '"baseline_records"?)'),
    ('factr = 10\n', 'stop[0].factr: unknown key (did you mean "factor"?)'),
    ('minutes = 3\n', 'stop[0].minutes: unknown key'),
])
def test_a_misspelt_or_foreign_key_is_refused_with_exit_2(tmp_path, extra, said):
    out = check(str(_plan(tmp_path, DIVERGED + extra)))
    assert out.returncode == 2 and said in out.stderr, out.stderr


@pytest.mark.parametrize("stop, said", [
    ('[[stop]]\nrule = "diverge"\nfactor = 10\n', 'did you mean "diverged"'),
    ('[[stop]]\nrule = "diverged"\n', "stop[0].factor"),
    ('[[stop]]\nrule = "diverged"\nfactor = 1\n', "must be above 1"),
    ('[[stop]]\nrule = "diverged"\nfactor = 10\nbaseline_records = 0\n',
     "stop[0].baseline_records"),
])
def test_a_factor_is_required_above_1_and_the_baseline_needs_a_record(tmp_path, stop, said):
    out = check(str(_plan(tmp_path, stop)))
    assert out.returncode == 2 and said in out.stderr, out.stderr


def test_a_challenger_stopped_by_diverged_is_an_answer_so_no_is_earned(tmp_path):
    plan = plan_of(tmp_path)
    state = replay(full(1, "control", completed) + full(10, "lora16", completed)
                   + full(20, "lora64", stopped_by("diverged")))
    assert verdict_of(plan, state, NO_WIN).kind == "no"


def test_a_loss_that_grows_to_1e8_while_finite_is_stopped_and_named_diverged(tmp_path):
    """printer.py's loss is 1/step (printed to 5 places: the first five's median is
    0.33333), then from step 20 grows tenfold a step to 1e8: 100 at step 21 is the
    first figure over 100 x 0.33333."""
    from tui.service.status import status_dict

    path = write_plan(tmp_path, control_only(printer_cmd("--steps", "400", "--explode-at", "20")),
                      DIVERGED + '\n[[stop]]\nrule = "non_finite"\n')
    engine, _ = drive_plan(path)  # on the fake processes (tests/fakeprocs.py)
    (run,) = [r for r in engine.state.runs if r.kind == "run"]
    assert run.state == "stopped" and run.stop.rule == "diverged"
    assert (run.stop.step, run.stop.value) == (21, 100.0)
    fired = [e for e in read_ledger(tmp_path / ".itera" / "ledger.jsonl")
             if e["event"] == "stop_rule_fired"]
    assert [(e["rule"], e["step"]) for e in fired] == [("diverged", 21)]
    status = status_dict(path)
    (row,) = [r for r in status["runs"] if r["id"] == run.id]
    assert row["state"] == "stopped" and row["stop"]["rule"] == "diverged"
    assert "over 100 x its baseline 0.33333 " in row["stop"]["reason"]
    assert status["budget"]["per_deliverable_usd"] is None  # not an accepted model
    (rejected,) = status["budget"]["rejections"]
    assert rejected["cause"].startswith("stopped by diverged: loss=100 at step 21")
    report = compare(load_plan(path), engine.state,
                     read_ledger(tmp_path / ".itera" / "ledger.jsonl"))
    (row,) = report.rows
    assert row.outcome == "stopped (diverged)"
    assert any("stopped by diverged at step 21" in text for _, text in report.deviations)
