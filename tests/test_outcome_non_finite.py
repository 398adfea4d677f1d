"""A run that trained into NaN is never an accepted deliverable, even at exit 0.

Before, a Lightning run whose bar printed `train_loss=nan.0` finished with
exit 0 and was accepted. Acceptance now reads the run's records through the
same feeds as the engine: a watched metric that was non-finite in any record,
or a last decision-metric value that is non-finite, rejects the run, and the
budget, the bundle and the conclusion say why.
"""

import json

from tui.campaign import load_plan
from tui.engine.ledger.file import Ledger, read_ledger
from tui.engine.conclusion.outcome import budget, conclude, read_run, rejection_cause
from tui.engine.ledger.state import replay
from tui.engine.ledger.events import RunExited, RunLaunched

PLAN = """
[campaign]
name = "t"
question = "q"
metric = "acc"
min_gain = 0.01

[[lot]]
gpu = "cpu"
hours = 1
price_usd = 1.0

[[variant]]
id = "control"
category = "mandatory"
command = ["python", "x.py"]
minutes = 5

[[variant]]
id = "wide"
category = "useful"
command = ["python", "x.py"]
minutes = 5

[metrics]
{metrics}
{stops}
"""


def _campaign(tmp_path, metrics='loss = "loss (\\\\S+)"\nacc = "acc (\\\\S+)"', stops=""):
    (tmp_path / "campaign.toml").write_text(PLAN.format(metrics=metrics, stops=stops))
    plan = load_plan(tmp_path / "campaign.toml")
    ledger = Ledger(tmp_path / "ledger.jsonl", clock=lambda: 5.0)
    for vid in ("control", "wide"):
        ledger.append(RunLaunched(run=f"{vid}-h-1", target=vid, kind="run",
                      category="mandatory" if vid == "control" else "useful", attempt=1,
                      config_hash="h", pid=1, pid_start=1.0))
        ledger.append(RunExited(run=f"{vid}-h-1", exit_code=0))
        (tmp_path / f"{vid}-h-1").mkdir()
    return plan, replay(read_ledger(tmp_path / "ledger.jsonl"))


def test_a_nan_watched_metric_in_any_record_rejects_a_run_that_exited_0(tmp_path):
    plan, state = _campaign(tmp_path)
    (tmp_path / "control-h-1" / "stdout.log").write_text("loss 0.5 acc 0.70\n")
    (tmp_path / "wide-h-1" / "stdout.log").write_text(
        "loss 0.5 acc 0.71\nloss nan.0 acc 0.72\nloss 0.4 acc 0.90\n")
    wide = state.run("wide-h-1")
    assert wide.state == "completed" and wide.stop is None
    cause = rejection_cause(plan, wide, tmp_path / "wide-h-1")
    assert cause == "non-finite numbers: loss was nan at record 2 of stdout (no step printed)"
    assert rejection_cause(plan, state.run("control-h-1"), tmp_path / "control-h-1") is None
    b = budget(plan, state, tmp_path)
    assert [(r.run_id, r.cause) for r in b.rejections] == [("wide-h-1", cause)]
    found = conclude(plan, state, tmp_path)  # the NaN-trained variant's 0.90 does not win
    assert found.winners == () and "wide" not in found.values


def test_a_non_finite_last_decision_metric_rejects_the_run(tmp_path):
    plan, state = _campaign(tmp_path)
    (tmp_path / "control-h-1" / "metrics.jsonl").write_text(
        json.dumps({"step": 1, "loss": 0.5, "acc": 0.7}) + "\n"
        + '{"step": 2, "loss": 0.4, "acc": NaN}\n')
    readout = read_run(plan, tmp_path / "control-h-1", "control")
    assert readout.final_metric == 0.7 and readout.non_finite == \
        "non-finite numbers: its last acc is nan"
    found = conclude(plan, state, tmp_path)
    assert not found.conclusive and "its last acc is nan" in found.text


def test_the_preset_decides_what_is_watched_when_no_rule_names_metrics(tmp_path):
    """hf_trainer hides a NaN loss (logging_nan_inf_filter): grad_norm is watched too."""
    plan, state = _campaign(tmp_path, metrics='preset = "hf_trainer"',
                            stops='[[stop]]\nrule = "non_finite"\n')
    assert plan.stops[0].metrics == ("loss", "grad_norm", "eval_loss")
    (tmp_path / "wide-h-1" / "stdout.log").write_text(
        "{'loss': '3.9', 'grad_norm': '0.8', 'epoch': '0.5'}\n"
        "{'loss': '0', 'grad_norm': 'nan', 'epoch': '1.0'}\n"
        "{'acc': '0.8', 'epoch': '1.0'}\n")
    cause = rejection_cause(plan, state.run("wide-h-1"), tmp_path / "wide-h-1")
    assert cause is not None and cause.startswith("non-finite numbers: grad_norm was nan")


def test_an_explicit_rule_list_is_what_acceptance_watches(tmp_path):
    plan, state = _campaign(tmp_path, stops='[[stop]]\nrule = "non_finite"\n'
                            'metrics = ["acc"]\nvariants = ["wide"]\n')
    (tmp_path / "wide-h-1" / "stdout.log").write_text("loss nan acc 0.9\n")
    (tmp_path / "control-h-1" / "stdout.log").write_text("loss nan acc 0.9\n")
    assert rejection_cause(plan, state.run("wide-h-1"), tmp_path / "wide-h-1") is None
    control = rejection_cause(plan, state.run("control-h-1"), tmp_path / "control-h-1")
    assert control == "non-finite numbers: loss was nan at record 1 of stdout (no step printed)"  # default: loss
