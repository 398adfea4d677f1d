"""`check` is linear in the number of variants (2 000 took 46 s when identical
configurations were found by comparing every pair; bench/check_bench.py times
it). Asserted here by the work done, not the wall time: the pairwise comparison
runs once per variant, and twins are still found."""

import tomllib
from pathlib import Path

from tui.campaign import ablation as ablation_module
from tui.campaign import check_summary, plan_from_dict


def plan_of(n: int, tmp_path: Path, twins: int = 0):
    text = '[campaign]\nname = "big"\nquestion = "q"\n\n[[lot]]\ngpu = "RTX 4090"\ndays = 30\n'
    for i in range(n):
        lr = 1 if i >= n - twins else i  # the last `twins` share one configuration
        text += (f'\n[[variant]]\nid = "v{i}"\ncategory = "{"mandatory" if i == 0 else "useful"}"'
                 f'\ncommand = ["python", "train.py", "--lr", "{lr}e-4"]\nhours = 0.1\n')
    return plan_from_dict(tomllib.loads(text), tmp_path / "campaign.toml", check_files=False)


def test_check_compares_each_variant_once_not_every_pair(tmp_path, monkeypatch):
    calls = []
    real = ablation_module.changes_against
    monkeypatch.setattr(ablation_module, "changes_against",
                        lambda *a: calls.append(1) or real(*a))
    n = 400
    check_summary(plan_of(n, tmp_path, twins=3))
    assert 0 < len(calls) <= n  # each variant against the control; pairs would be ~80 000
    found = ablation_module.ablation(plan_of(n, tmp_path, twins=3)).warnings
    assert any(w.startswith("v1, v397, v398, v399 are identical") for w in found), found
