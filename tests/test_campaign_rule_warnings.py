"""`check` says when a stop rule cannot see what it is meant to catch (advice, exit 0)."""

import json

import pytest

from clikit import cli

PLAN = """
[campaign]
name = "hf"
question = "q"
metric = "eval_loss"
direction = "min"

[[lot]]
gpu = "RTX 4090"
days = 3

[[variant]]
id = "control"
category = "mandatory"
command = "python train.py"
hours = 1

[metrics]
preset = "hf_trainer"

[[stop]]
rule = "non_finite"
"""


@pytest.mark.parametrize("rule,warned", [
    ("", False),  # the preset's default: loss, grad_norm and eval_loss
    ('metrics = ["loss"]\n', True),
    ('metrics = ["loss", "grad_norm"]\n', False),
])
def test_non_finite_on_loss_alone_under_the_hf_preset_is_warned(tmp_path, rule, warned):
    path = tmp_path / "campaign.toml"
    path.write_text(PLAN + rule)
    text = cli("check", str(path), "--no-files")
    assert text.returncode == 0, text.stderr
    data = json.loads(cli("check", str(path), "--no-files", "--json").stdout)
    assert bool(data["rule_warnings"]) is warned
    line = ("warning (rules): non_finite watches only loss, but under preset = \"hf_trainer\" "
            "HF prints the loss with logging_nan_inf_filter on")
    assert (line in text.stdout) is warned


def test_no_warning_without_the_preset(tmp_path):
    path = tmp_path / "campaign.toml"
    path.write_text(PLAN.replace('[metrics]\npreset = "hf_trainer"\n', ""))
    data = json.loads(cli("check", str(path), "--no-files", "--json").stdout)
    assert data["rule_warnings"] == []
