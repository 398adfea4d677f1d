"""HF log dicts read from stdout get their true step (issue 34, item 5).

The Trainer prints `{'loss': '3.91', ..., 'epoch': '0.08333'}` with no step; its
bar (none at all with `disable_tqdm`) is another file, read after. The step of
such a dict is its own `epoch` times the trainer's steps per epoch, read from
the `trainer_state.json` of a checkpoint it saved; the figures are drawn from
those records, never "no loss recorded" for a loss that was printed.
"""

from __future__ import annotations

import json

import pytest

from conftest import needs
from enginekit import drive, script_cmd
from test_frameworks_campaign import campaign
from tui.bundle.plots import read_series
from tui.campaign import load_plan
from tui.engine.reading.feeds import recorded_sources


def test_epoch_steps_come_from_the_trainers_own_log_history(tmp_path):
    from tui.engine.reading.printed import EpochSteps

    folder = tmp_path / "out" / "checkpoint-6"
    folder.mkdir(parents=True)
    history = [{"step": s, "epoch": s / 12, "loss": 1.0} for s in range(1, 7)]
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    epochs = EpochSteps(tmp_path)
    assert [epochs.step_of(e) for e in (0.08333, 0.1667, 0.25, 0.5)] == [1, 2, 3, 6]
    assert epochs.step_of(float("nan")) is None and epochs.step_of(0.0) is None
    assert EpochSteps(tmp_path / "nothing").step_of(0.25) is None  # no state: no guess


@pytest.mark.slow
@needs("transformers")
def test_printed_hf_dicts_take_the_true_step_and_draw_their_figure(tmp_path):
    path = campaign(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {script_cmd("hf_train.py", "--steps", "12", "--save-steps", "4",
                              "--no-callback", "--output-dir", "{run_dir}/hf-out")}
        minutes = 5

        [metrics]
        preset = "hf_trainer"
    """)
    engine = drive(path, timeout=300)
    (run,) = engine.state.runs
    assert run.state == "completed"
    plan = load_plan(path, check_files=False)
    run_dir = plan.state_dir / "runs" / run.id
    state = json.loads((run_dir / "hf-out" / "checkpoint-12" / "trainer_state.json").read_text())
    true_steps = [e["step"] for e in state["log_history"] if "loss" in e]
    assert true_steps == list(range(1, 13))
    printed = [r for r in recorded_sources(run_dir, plan.metrics, frozenset({"loss"}))[1]
               if "loss" in r]
    assert [r.get("global_step") for r in printed] == true_steps  # not "no step yet"
    series = read_series(plan, run_dir, "loss")
    assert [s for s, _ in series] == true_steps  # the figure has its twelve points
