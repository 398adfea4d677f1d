"""`check` knows what the callbacks, the presets and TensorBoard report (issue 34, item 2).

The README's one-line HF plan (`callbacks=[IteraCallback()]`, metric
`eval_loss`) got exit 2 "no run can report eval_loss" although the Trainer logs
it at every evaluation and the callback passes it on; `run` then read it fine.
"""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from clikit import check
from conftest import REPO
from tui.campaign import load_plan
from tui.campaign.preflight import sure_failures

# the README's own lines ("Hugging Face and Lightning: one line"), as a user pastes them
HF_SCRIPT = """\
from transformers import Trainer, TrainingArguments
from tui.integrations import resume_from
from tui.integrations.hf import IteraCallback             # transformers.Trainer
args = TrainingArguments(output_dir="out", eval_strategy="steps", eval_steps=10)
trainer = Trainer(model=m, args=args, train_dataset=ds, eval_dataset=ev,
                  callbacks=[IteraCallback()])
trainer.train(resume_from_checkpoint=resume_from())
"""
PLAIN_HF = HF_SCRIPT.replace("from tui.integrations import resume_from\n", "").replace(
    "from tui.integrations.hf import IteraCallback             # transformers.Trainer\n",
    "").replace(",\n                  callbacks=[IteraCallback()]", "").replace(
    "resume_from_checkpoint=resume_from()", "")


def plan_text(metric: str, metrics: str = "") -> str:
    return textwrap.dedent(f"""
        [campaign]
        name = "hf"
        question = "does a lower lr help?"
        metric = "{metric}"
        direction = "min"

        [[lot]]
        gpu = "cpu"
        hours = 1
        price_usd = 1.0

        [[variant]]
        id = "control"
        category = "mandatory"
        command = ["python", "train.py"]
        minutes = 10
    """) + textwrap.dedent(metrics)


def findings(tmp_path, script: str, metric: str, metrics: str = ""):
    (tmp_path / "train.py").write_text(script)
    path = tmp_path / "campaign.toml"
    path.write_text(plan_text(metric, metrics))
    return [f for f in sure_failures(load_plan(path, check_files=False))
            if f.key == "campaign.metric"]


def test_the_readme_one_line_hf_plan_passes_check(tmp_path):
    (tmp_path / "train.py").write_text(HF_SCRIPT)
    path = tmp_path / "campaign.toml"
    path.write_text(plan_text("eval_loss"))
    proc = check(str(path))
    assert proc.returncode == 0, proc.stderr
    assert "eval_loss" not in proc.stdout + proc.stderr  # no error and no warning about it


@pytest.mark.parametrize("metric", ["eval_loss", "grad_norm", "learning_rate",
                                    "mean_token_accuracy", "eval_runtime"])
def test_what_the_hf_trainer_logs_by_itself_is_recognised(tmp_path, metric):
    assert findings(tmp_path, HF_SCRIPT, metric) == []  # through the callback
    # a plain Trainer (no callback) read through its printed dicts or its TensorBoard files
    assert findings(tmp_path, PLAIN_HF, metric, '[metrics]\npreset = "hf_trainer"\n') == []
    if _has_tensorboard():  # the plan's [metrics] tensorboard needs the package
        assert findings(tmp_path, PLAIN_HF, metric, '[metrics]\ntensorboard = '
                        '"out/runs/**/events.out.tfevents.*"\n') == []


def _has_tensorboard() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorboard") is not None


def test_under_the_hf_trainer_preset_its_names_pass_whatever_the_command(tmp_path):
    """`python -m` a module nobody can read here (TRL's own script, say): the plan's
    preset says the runs print HF's dicts."""
    (tmp_path / "campaign.toml").write_text(plan_text("eval_loss", '[metrics]\npreset = '
                                            '"hf_trainer"\n').replace(
        'command = ["python", "train.py"]', 'command = ["python", "-m", "trl.scripts.nope"]'))
    plan = load_plan(tmp_path / "campaign.toml", check_files=False)
    assert not [f for f in sure_failures(plan) if f.key == "campaign.metric"]


def test_a_name_no_framework_reports_is_still_refused(tmp_path):
    # a plain Trainer read by nothing: its dicts are printed, no preset reads them
    (found,) = findings(tmp_path, PLAIN_HF, "eval_loss")
    assert found.certain and 'no run can report "eval_loss"' in found.text
    (found,) = findings(tmp_path, HF_SCRIPT, "eval_bleu")  # not logged by HF, not in code
    assert found.certain and 'no run can report "eval_bleu"' in found.text


def readme_plans() -> list[str]:
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```toml\n(.*?)```", text, flags=re.S)
    return [b for b in blocks if re.search(r"^\[campaign\]", b, flags=re.M)]


def test_every_campaign_toml_example_of_the_readme_passes_check(tmp_path):
    plans = readme_plans()
    if not plans:
        pytest.skip("README.md shows no complete campaign.toml yet")
    for i, plan in enumerate(plans):
        root = tmp_path / f"example{i}"
        root.mkdir()
        (root / "campaign.toml").write_text(plan)
        for script in set(re.findall(r"([\w/.-]+\.py)", plan)):
            (root / script).parent.mkdir(parents=True, exist_ok=True)
            (root / script).write_text(HF_SCRIPT)
        proc = check("--no-files", "--json", str(root / "campaign.toml"))
        assert proc.returncode in (0, 1), (i, plan, proc.stderr)  # 1: the window's fit
        assert not [f for f in json.loads(proc.stdout)["findings"]
                    if f["level"] == "error"], plan
