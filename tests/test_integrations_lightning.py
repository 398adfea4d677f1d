"""Lightning + IteraCallback, and Lightning's own ModelCheckpoint under the watcher,
as real processes speaking the run protocol (tests/scripts/lightning_train.py:
an MLP with dropout on data made in the script, CPU, a few seconds each)."""

import time

import pytest
import torch

from conftest import needs
from runkit import launch
from tui.campaign.files import sha256_file
from tui.engine.checkpoints.watched import CheckpointWatcher

pytestmark = [needs("lightning"), pytest.mark.slow]  # real training runs


def test_checkpoint_request_then_wrapup_stop_and_a_fresh_process_resume(tmp_path):
    run = launch("lightning_train.py", tmp_path / "run", "--steps", "80", "--sleep", "0.08")
    run.wait_for(lambda r: any(s >= 4 for s in r.losses()), what="step 4 logged")
    seq = run.request("checkpoint")
    first = run.wait_for(lambda r: r.acks(), what="checkpoint ack")[0]
    run.wait_for(lambda r: max(r.losses()) >= first["step"] + 12, what="12 more steps")
    run.wrapup_stop()
    assert run.finish() == 0, run.stderr_tail()
    losses = run.losses()
    stopped_at = max(losses)
    acks = run.acks()
    assert [a["step"] for a in acks] == [first["step"], stopped_at] and stopped_at < 80
    for ack, request in zip(acks, (seq, seq + 1)):
        path = run.run_dir / ack["path"]
        assert ack["path"] == f"checkpoints/step-{ack['step']:06d}.ckpt"
        assert ack["mode"] == "lightning" and ack["request_seq"] == request
        assert (ack["sha256"], ack["bytes"]) == sha256_file(path)
        state = torch.load(path, weights_only=True)  # what the engine's verifier does
        assert state["global_step"] == ack["step"] and "IteraCallback" in state["callbacks"]
    assert not list((run.run_dir / "checkpoints").glob(".*"))  # no temp file left behind
    # a validation ran between the checkpoint and the stop, in a record of its own
    validations = [r for r in run.records() if "val_loss" in r]
    assert validations and all(set(r) == {"t", "step", "val_loss"} for r in validations)

    resumed = launch("lightning_train.py", tmp_path / "resumed", "--steps", "80",
                     env={"ITERA_RESUME": str(run.run_dir / first["path"]),
                          "ITERA_MAX_STEPS": str(stopped_at)})
    assert resumed.finish() == 0, resumed.stderr_tail()
    again = resumed.losses()
    assert min(again) == first["step"] + 1 and max(again) == stopped_at
    assert all(again[s] == losses[s] for s in again), (again, losses)  # bitwise, dropout too


def test_max_steps_longer_than_the_script_plans_raises_its_max_steps(tmp_path):
    # (stopping early at ITERA_MAX_STEPS is shown by the resumed run above)
    run = launch("lightning_train.py", tmp_path / "run", "--steps", "3",
                 env={"ITERA_MAX_STEPS": "7"})
    assert run.finish() == 0, run.stderr_tail()
    assert sorted(run.losses()) == list(range(1, 8))


def test_model_checkpoint_files_are_found_complete_by_the_watcher(tmp_path):
    run = launch("lightning_train.py", tmp_path / "run", "--steps", "30", "--model-checkpoint",
                 "--every", "10", "--sleep", "0.05")
    watcher = CheckpointWatcher(run.run_dir, ["lightning-ckpts/*.ckpt"], settle_s=0.5,
                                scan_every_s=0.1)
    acks = []
    while run.popen.poll() is None:  # the engine polls each tick while the run lives
        acks += watcher.poll(time.time())
        time.sleep(0.05)
    assert run.popen.returncode == 0, run.stderr_tail()
    acks += watcher.drain(time.time())
    assert watcher.take_problems() == []
    files = sorted((run.run_dir / "lightning-ckpts").glob("*.ckpt"))
    assert [f.name for f in files] == ["step=10.ckpt", "step=20.ckpt", "step=30.ckpt"]
    by_path = {a["path"]: a for a in acks}
    assert len(acks) == len(by_path) == 3  # each once
    for f in files:
        ack = by_path[f"lightning-ckpts/{f.name}"]
        assert (ack["sha256"], ack["bytes"]) == sha256_file(f)
        assert ack["mode"] == "watched" and ack["step"] == int(f.stem.split("=")[1])
    assert sum(1 for r in run.records() if "event" in r) == 0  # no SDK in that script


@pytest.mark.parametrize("env,expected", [
    ({"ITERA_CHECKPOINT_AT": "2"}, [2, 8]),  # asked early: the finished model is saved too
    ({"ITERA_FINAL_CHECKPOINT": "1"}, [8]),  # the plan's resume rule needs one
])
def test_the_end_of_training_is_saved_when_a_checkpoint_was_asked_for(tmp_path, env, expected):
    run = launch("lightning_train.py", tmp_path / "run", "--steps", "8", env=env)
    assert run.finish() == 0, run.stderr_tail()
    acks = run.acks()
    assert [a["step"] for a in acks] == expected
    assert acks[-1]["path"] == "checkpoints/step-000008.ckpt"
