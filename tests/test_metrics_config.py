"""`[metrics]` as users write it: patterns, streams, presets, TensorBoard, tags."""

import importlib.util

import pytest

from clikit import cli
from tui.campaign import load_plan
from tui.campaign.validate import PlanError

BASE = """
[campaign]
name = "t"
question = "q"
metric = "acc"

[[lot]]
gpu = "cpu"
hours = 1
price_usd = 1.0

[[variant]]
id = "control"
category = "mandatory"
command = ["python", "train.py"]
minutes = 5

[[stop]]
rule = "non_finite"
"""


def _plan(write_campaign, metrics: str):
    return load_plan(write_campaign(BASE + "\n[metrics]\n" + metrics))


def _problems(write_campaign, metrics: str) -> list[str]:
    with pytest.raises(PlanError) as err:
        _plan(write_campaign, metrics)
    return err.value.problems


def test_a_pattern_applies_to_both_streams_unless_its_table_names_one(write_campaign):
    plan = _plan(write_campaign, """
        loss = 'loss (\\S+)'
        acc = { pattern = 'acc=(\\S+)', stream = "stderr" }
        lr = { pattern = 'lr (\\S+)', stream = "both" }
    """)
    streams = {p.name: p.streams for p in plan.metrics.patterns}
    assert streams == {"loss": ("stdout", "stderr"), "acc": ("stderr",),
                       "lr": ("stdout", "stderr")}
    assert plan.stops[0].metrics == ("loss",)  # no preset: non_finite watches loss


def test_a_preset_sets_what_non_finite_watches_and_user_patterns_override_it(write_campaign):
    plan = _plan(write_campaign, """
        preset = "hf_trainer"
        step = 'global step (\\d+)'
        acc = "'eval_acc': '?([^',}]+)"
    """)
    assert plan.metrics.preset == "hf_trainer" and plan.metrics.pairs
    assert plan.stops[0].metrics == ("loss", "grad_norm", "eval_loss")
    names = [p.name for p in plan.metrics.patterns]
    assert names == ["step", "acc"]  # the user's step replaced the bar's step and total


@pytest.mark.parametrize("preset", ["hf_trainer", "lightning", "pytorch_examples", "nanogpt"])
def test_each_preset_name_is_the_contract(write_campaign, preset):
    assert _plan(write_campaign, f'preset = "{preset}"').metrics.preset == preset


def test_every_metrics_mistake_names_its_key(write_campaign):
    problems = _problems(write_campaign, """
        preset = "keras"
        tensorboard = "../elsewhere/*"
        loss = { pattern = 'loss (\\S+)', stream = "stdin" }
        acc = { regex = 'acc (\\S+)' }
        lr = 5
        t = 'time (\\S+)'
        bad = '(unclosed'
        nogroup = 'loss \\S+'
        [metrics.tags]
        "Loss/train" = 3
    """)
    text = "\n".join(problems)
    for needle in ("metrics.preset: expected hf_trainer|lightning|pytorch_examples|nanogpt",
                   "metrics.tensorboard: a glob relative to the run directory",
                   "metrics.loss.stream: expected both|stdout|stderr",
                   "metrics.acc.pattern: required key is missing",
                   'metrics.acc.regex: unknown key',
                   "metrics.lr: expected a regex string or a table",
                   "metrics.t: reserved", "metrics.bad: not a valid regex",
                   "metrics.nogroup: the regex needs one capturing group",
                   'metrics.tags."Loss/train": expected the metric name'):
        assert needle in text, needle


def test_tensorboard_glob_and_tags_are_read(write_campaign):
    plan = _plan(write_campaign, """
        tensorboard = "lightning_logs/**/events.out.tfevents.*"
        [metrics.tags]
        "Loss/train" = "loss"
    """)
    assert plan.metrics.tensorboard == "lightning_logs/**/events.out.tfevents.*"
    assert plan.metrics.tags == (("Loss/train", "loss"),) and not plan.metrics.printed


def test_tensorboard_without_its_package_is_a_clear_error(write_campaign, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tensorboard" else real(name, *a))
    (problem,) = _problems(write_campaign, 'tensorboard = "runs/*/events.*"')
    assert problem == ("metrics.tensorboard: reading TensorBoard event files needs the "
                       "tensorboard package: pip install 'itera-tui[tensorboard]'")


def test_check_exits_2_naming_the_metrics_key(write_campaign):
    path = write_campaign(BASE + '\n[metrics]\nloss = { pattern = "x(.)", stream = "out" }\n')
    done = cli("check", str(path), cwd=path.parent)
    assert done.returncode == 2 and "metrics.loss.stream" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
