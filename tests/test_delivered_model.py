"""`load_best_model_at_end`: the compared figure, the bundled checkpoint and the
delivered model are one model, and the report says which step (issue 34, item 4).

HF reloads the best checkpoint (by `metric_for_best_model`) when training ends,
and the script saves that model. Here `greater_is_better=True` on `eval_loss`
makes the best an early checkpoint of a run whose eval_loss falls, so the last
evaluation, the last checkpoint and the delivered model would all differ.

With the callback the script says so in a `best_model` event; without it (zero
lines changed, issue 41 item 1) its checkpoint folders say it: the last one's
`trainer_state.json` names the best, its `training_args.bin` that it is reloaded.
"""

from __future__ import annotations

import json

import pytest

from conftest import needs
from enginekit import drive, script_cmd
from test_frameworks_campaign import campaign
from tui.bundle.wrapup import build_bundle
from tui.campaign import load_plan
from tui.engine.conclusion.outcome import read_run

ZERO_LINE = """
        [metrics]
        preset = "hf_trainer"

        [checkpoint]
        watch = ["hf-out/checkpoint-*"]
"""


@pytest.mark.slow
@needs("transformers", "safetensors")
@pytest.mark.parametrize("callback", [True, False], ids=["callback", "zero-line"])
def test_best_model_at_end_is_the_compared_bundled_and_reported_model(tmp_path, callback):
    from safetensors.torch import load_file

    flags = () if callback else ("--no-callback",)
    path = campaign(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {script_cmd("hf_train.py", "--steps", "12", "--save-steps", "4",
                              "--load-best", "--best-is-greater", *flags,
                              "--output-dir", "{run_dir}/hf-out")}
        minutes = 5
    """, "" if callback else ZERO_LINE).read_text().replace('metric = "loss"',
                                                           'metric = "eval_loss"')
    (tmp_path / "campaign.toml").write_text(path)
    engine = drive(tmp_path / "campaign.toml", timeout=300, verifications=True)
    (run,) = engine.state.runs
    assert run.state == "completed"
    plan = load_plan(tmp_path / "campaign.toml", check_files=False)
    run_dir = plan.state_dir / "runs" / run.id
    state = json.loads((run_dir / "hf-out/checkpoint-12/trainer_state.json").read_text())
    evals = {e["step"]: e["eval_loss"] for e in state["log_history"] if "eval_loss" in e}
    assert sorted(evals) == [4, 8, 12]
    best_step = max(evals, key=evals.get)
    assert best_step != 12  # the best is not the last: the case this is about
    assert state["best_model_checkpoint"].endswith(f"checkpoint-{best_step}")
    readout = read_run(plan, run_dir, run.target)
    assert readout.delivered.step == best_step
    assert readout.delivered.path == f"hf-out/checkpoint-{best_step}"
    assert readout.final_metric == evals[best_step] != evals[12]  # the delivered one's figure
    result = build_bundle(plan)
    manifest = json.loads((result.bundle_dir / "manifest.json").read_text())
    (entry,) = manifest["runs"]
    assert entry["checkpoint"] == f"runs/{run.id}/hf-out/checkpoint-{best_step}"
    assert entry["checkpoint_step"] == best_step and entry["final_metric"] == evals[best_step]
    assert entry["delivered"]["bundled"] is True
    bundled = load_file(str(result.bundle_dir / entry["checkpoint"] / "model.safetensors"))
    delivered = load_file(str(run_dir / "hf-out" / "final" / "model.safetensors"))
    assert bundled.keys() == delivered.keys()
    assert all((bundled[k] == delivered[k]).all() for k in bundled)  # the same model
    report = (result.bundle_dir / "report.md").read_text()
    assert (f"delivered model: step {best_step} (`hf-out/checkpoint-{best_step}`, the best "
            f"eval_loss") in report
    assert f"bundled step {best_step}" in report


class Payload:
    """Would write a file if the pickle were ever executed (it never is)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _checkpoint(folder, load_best, best, tripwire=None) -> None:
    import io
    import pickle
    import zipfile

    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({
        "global_step": 12, "best_model_checkpoint": best, "best_metric": 0.25,
        "best_global_step": 4, "log_history": []}))
    fields = {"output_dir": "hf-out", "load_best_model_at_end": load_best,
              "metric_for_best_model": "loss", "logging_steps": 5}
    if tripwire is not None:
        fields["hook"] = Payload(tripwire)
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:  # torch.save's layout, without torch
        archive.writestr("training_args/data.pkl", pickle.dumps(fields, protocol=2))
    (folder / "training_args.bin").write_bytes(data.getvalue())


@pytest.mark.parametrize("load_best", [True, False])
def test_the_checkpoint_folders_name_the_delivered_model_only_with_load_best(tmp_path,
                                                                             load_best):
    from tui.engine.conclusion.delivered import DeliveredModel
    from tui.engine.reading.trainer_state import training_args

    (tmp_path / "hf-out" / "checkpoint-4").mkdir(parents=True)
    tripwire = tmp_path / "executed"
    _checkpoint(tmp_path / "hf-out" / "checkpoint-12", load_best,
                "/elsewhere/hf-out/checkpoint-4", tripwire)
    args = training_args(tmp_path / "hf-out" / "checkpoint-12")
    assert args["load_best_model_at_end"] is load_best and args["logging_steps"] == 5
    assert not tripwire.exists()  # read from its opcodes, never unpickled
    found = DeliveredModel.from_run_files(tmp_path)
    if not load_best:  # HF names a best checkpoint anyway, and keeps the last model
        assert found is None
        return
    assert found == DeliveredModel("hf-out/checkpoint-4", 4, "eval_loss", 0.25)
    import shutil

    shutil.rmtree(tmp_path / "hf-out" / "checkpoint-4")  # not there: nothing is claimed
    assert DeliveredModel.from_run_files(tmp_path) is None
