"""HF Trainer + IteraCallback, as real processes speaking the run protocol.

The script (tests/scripts/hf_train.py) trains a 1-layer GPT-2 built from a
config on CPU; nothing is downloaded. Each process takes a few seconds.
"""

import json
import subprocess
import sys
import time

import pytest

from conftest import needs
from runkit import REPO, is_non_finite, launch
from tui.campaign.files import sha256_tree
from tui.campaign.plan import StopRule
from tui.engine.rules import RuleSet
from tui.engine.checkpoints.watched import CheckpointWatcher

pytestmark = [needs("transformers", "accelerate"), pytest.mark.slow]  # real training runs


def test_nan_weights_reach_the_non_finite_rule_through_the_default_nan_filter(tmp_path):
    run = launch("hf_train.py", tmp_path / "run", "--steps", "20", "--nan-at", "15")
    assert run.finish() == 0, run.stderr_tail()
    logged = [r for r in run.records() if "loss" in r and "event" not in r]
    before = [r for r in logged if r["step"] < 15]
    assert len(before) == 14 and all(not is_non_finite(r["loss"]) for r in before)
    first_after = next(r for r in logged if r["step"] >= 15)
    assert first_after["step"] == 15 and is_non_finite(first_after["loss"])
    assert is_non_finite(first_after["grad_norm"])
    # the engine's own rule, fed the records as it tails them, stops at that record
    rules = RuleSet((StopRule("non_finite", metrics=("loss",)),), "v", "run")
    stops = [(r["step"], rules.on_record(r, time.time())) for r in run.records()]
    step, stop = next((s, st) for s, st in stops if st is not None)
    assert step == 15 and stop.rule == "non_finite"
    assert "logging_nan_inf_filter turned off" in (run.run_dir / "stderr.log").read_text()


def test_checkpoint_request_then_wrapup_stop_and_a_fresh_process_resume(tmp_path):
    run = launch("hf_train.py", tmp_path / "run", "--steps", "60", "--sleep", "0.08")
    run.wait_for(lambda r: any(s >= 4 for s in r.losses()), what="step 4 logged")
    seq = run.request("checkpoint")
    first = run.wait_for(lambda r: r.acks(), what="checkpoint ack")[0]
    run.wait_for(lambda r: max(r.losses()) >= first["step"] + 4, what="4 more steps")
    run.wrapup_stop()
    assert run.finish() == 0, run.stderr_tail()
    acks = run.acks()
    assert len(acks) == 2
    last = acks[1]
    losses = run.losses()
    stopped_at = max(losses)
    assert last["step"] == stopped_at < 60  # saved in the step it stopped at, then stopped

    for ack, request in ((first, seq), (last, seq + 1)):
        assert ack["mode"] == "hf" and ack["request_seq"] == request
        folder = run.run_dir / ack["path"]
        assert ack["path"] == f"hf-out/checkpoint-{ack['step']}"  # redirected into the run dir
        assert (folder / "trainer_state.json").is_file() and (folder / "optimizer.pt").is_file()
        assert (folder / "model.safetensors").is_file() and (folder / "rng_state.pth").is_file()
        assert (ack["sha256"], ack["bytes"]) == sha256_tree(folder)
    assert json.loads((run.run_dir / first["path"] / "trainer_state.json").read_text())[
        "global_step"] == first["step"]

    # a fresh process resumes from the first checkpoint with resume_from_checkpoint
    resumed = launch("hf_train.py", tmp_path / "resumed", "--steps", "60",
                     env={"ITERA_RESUME": str(run.run_dir / first["path"]),
                          "ITERA_MAX_STEPS": str(stopped_at)})
    assert resumed.finish() == 0, resumed.stderr_tail()
    again = resumed.losses()
    assert min(again) == first["step"] + 1 and max(again) == stopped_at
    assert all(again[s] == losses[s] for s in again), (again, losses)  # bitwise


def test_max_steps_stops_without_rescheduling_and_save_only_model_is_warned_about(tmp_path):
    run = launch("hf_train.py", tmp_path / "run", "--steps", "40", "--save-steps", "3",
                 "--save-only-model", env={"ITERA_MAX_STEPS": "6"})
    assert run.finish() == 0, run.stderr_tail()
    records = [r for r in run.records() if "learning_rate" in r]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 6]
    # the linear schedule still spans the script's 40 steps: lr(6) = 5e-3 * (1 - 5/40)
    assert records[-1]["learning_rate"] == pytest.approx(5e-3 * 35 / 40)
    assert "save_only_model=True" in (run.run_dir / "stderr.log").read_text()
    assert [a["step"] for a in run.acks()] == [3, 6]  # scheduled saves are acknowledged too


def test_plain_hf_checkpoint_folders_are_found_complete_by_the_watcher(tmp_path):
    run_dir = tmp_path / "run"
    run = launch("hf_train.py", run_dir, "--steps", "12", "--save-steps", "4", "--no-callback",
                 "--output-dir", str(run_dir / "hf-out"), "--sleep", "0.15")
    watcher = CheckpointWatcher(run_dir, ["hf-out/checkpoint-*"], settle_s=3600, scan_every_s=0.1)
    acks = []
    while run.popen.poll() is None:
        acks += watcher.poll(time.time())  # complete by trainer_state.json, no settling
        time.sleep(0.05)
    assert run.popen.returncode == 0, run.stderr_tail()
    assert {4, 8} <= {a["step"] for a in acks}  # found complete while HF still trained
    acks += watcher.drain(time.time())
    assert sorted(a["step"] for a in acks) == [4, 8, 12] and watcher.take_problems() == []
    for ack in acks:
        assert ack["path"] == f"hf-out/checkpoint-{ack['step']}" and ack["mode"] == "watched"
        assert (ack["sha256"], ack["bytes"]) == sha256_tree(run_dir / ack["path"])


def test_outside_itera_the_callback_does_nothing(tmp_path):
    code = ("from tui.integrations.hf import IteraCallback; cb = IteraCallback(); "
            "print(cb.active)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
    assert list(tmp_path.iterdir()) == []  # no metrics file, no folder


@pytest.mark.parametrize("env,expected", [
    ({"ITERA_CHECKPOINT_AT": "2"}, [2, 10]),  # asked early: the finished model is saved too
    ({"ITERA_FINAL_CHECKPOINT": "1"}, [10]),  # the plan's resume rule needs one
    ({}, []),  # nobody asked: nothing saved
])
def test_the_end_of_training_is_saved_when_a_checkpoint_was_asked_for(tmp_path, env, expected):
    run = launch("hf_train.py", tmp_path / "run", "--steps", "10", "--output-dir",
                 str(tmp_path / "run" / "hf-out"), env=env)
    assert run.finish() == 0, run.stderr_tail()
    assert [a["step"] for a in run.acks()] == expected
