"""HF's `save_total_limit` deletes older `checkpoint-N/` folders while the engine's
verifier is still on its way to them: a rotation, never a verification failure.

The callback holds each acknowledged checkpoint with hard links until the fresh
verifier has read it, so the verdict is the checkpoint's own; one that went
before it could be read at all is "rotated away by the trainer", never FAILED
and never counted as a failure (issue 34, item 3).
"""

from __future__ import annotations

import pytest

from conftest import needs
from enginekit import drive, script_cmd
from test_frameworks_campaign import campaign
from tui.campaign import load_plan
from tui.engine.ledger.file import read_ledger
from tui.engine.ledger.lines import describe



@needs("transformers")
@pytest.mark.slow  # real runs and the real verifier
def test_hf_rotation_is_verified_from_the_held_links_and_never_reported_as_failed(tmp_path):
    path = campaign(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {script_cmd("hf_train.py", "--steps", "12", "--save-steps", "2",
                              "--save-total-limit", "1", "--output-dir", "{run_dir}/hf-out")}
        minutes = 5
    """)
    engine = drive(path, timeout=300, verifications=True)
    (run,) = engine.state.runs
    assert run.state == "completed"
    plan = load_plan(path)
    events = list(read_ledger(plan.state_dir / "ledger.jsonl"))
    acks = [e for e in events if e["event"] == "checkpoint_acknowledged"]
    assert len(acks) == 6  # checkpoint-2 ... checkpoint-12, five of them rotated away
    verdicts = [e for e in events if e["event"] == "checkpoint_verified"]
    assert verdicts and all(v["ok"] for v in verdicts), [v.get("problem") for v in verdicts]
    lines = [describe(e) or "" for e in events]
    assert not any("FAILED" in line for line in lines), [l for l in lines if "FAILED" in l]
    rotated = [e for e in events if e["event"] == "checkpoint_rotated"]
    assert {e["path"] for e in rotated} == {f"hf-out/checkpoint-{n}" for n in (2, 4, 6, 8, 10)}
    assert all("rotated away by the trainer" in (describe(e) or "") for e in rotated)
    # the newest one is still there, verified, and is the run's last verified checkpoint
    assert run.last_verified_checkpoint.path == "hf-out/checkpoint-12"
    assert not (plan.state_dir / "runs" / run.id / ".itera-held").exists() or not any(
        (plan.state_dir / "runs" / run.id / ".itera-held").iterdir())


@needs("torch")
@pytest.mark.slow  # real runs and the real verifier
def test_a_rotated_checkpoint_is_read_from_its_held_links_or_named_rotated_unread(tmp_path):
    import time

    import torch

    from enginekit import wait_for
    from tui.campaign.held import HELD_DIR, hold
    from tui.engine.checkpoints.queue import VerificationQueue
    from tui.engine.ledger.journal import Journal

    run_dir = tmp_path / "runs" / "r1"
    (run_dir / "out").mkdir(parents=True)
    torch.save({"w": torch.ones(3)}, run_dir / "out" / "held.pt")
    torch.save({"w": torch.ones(3)}, run_dir / "out" / "unheld.pt")
    held = hold(run_dir, "out/held.pt", "4-abc")
    assert held == f"{HELD_DIR}/4-abc/held.pt"
    (run_dir / "out" / "held.pt").unlink()  # the trainer's rotation, before the verifier
    (run_dir / "out" / "unheld.pt").unlink()
    journal = Journal(tmp_path / "ledger.jsonl", time.time)
    journal.open()
    queue = VerificationQueue(journal, tmp_path / "runs", env=lambda: {})
    try:
        queue.submit("r1", "out/held.pt", held, 4)
        queue.submit("r1", "out/unheld.pt", None, 6)
        def settled():
            queue.poll()
            return queue.pending() == 0
        wait_for(settled, timeout=240, what="both verdicts")
    finally:
        queue.close()
    events = [e for e in journal.recent(100) if e["event"].startswith("checkpoint_")]
    verified = [(e["path"], e["ok"]) for e in events if e["event"] == "checkpoint_verified"]
    rotated = [(e["path"], e["step"], e["verified"]) for e in events
               if e["event"] == "checkpoint_rotated"]
    assert verified == [("out/held.pt", True)]  # read from the held links: its real verdict
    assert rotated == [("out/held.pt", 4, True), ("out/unheld.pt", 6, None)]
    assert not (run_dir / HELD_DIR).exists()  # released once the verdict was in


@needs("transformers")
@pytest.mark.slow  # real runs and the real verifier
def test_watched_hf_checkpoints_under_rotation_are_never_failed(tmp_path):
    """No callback at all (`[checkpoint] watch`): the watcher links each folder before it
    hashes it; whatever the trainer deleted later is 'rotated away', never FAILED."""
    path = campaign(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {script_cmd("hf_train.py", "--steps", "16", "--save-steps", "2", "--sleep",
                              "0.15", "--save-total-limit", "1", "--no-callback",
                              "--output-dir", "{run_dir}/hf-out")}
        minutes = 5

        [checkpoint]
        watch = ["hf-out/checkpoint-*"]
    """)
    engine = drive(path, timeout=300, verifications=True)
    (run,) = engine.state.runs
    plan = load_plan(path)
    events = list(read_ledger(plan.state_dir / "ledger.jsonl"))
    acked = {e["path"] for e in events if e["event"] == "checkpoint_acknowledged"}
    verdicts = {e["path"]: e["ok"] for e in events if e["event"] == "checkpoint_verified"}
    rotated = {e["path"] for e in events if e["event"] == "checkpoint_rotated"}
    assert "hf-out/checkpoint-16" in acked and verdicts["hf-out/checkpoint-16"] is True
    assert all(verdicts.values()), verdicts
    assert acked == set(verdicts) | rotated  # each one has its verdict or its rotation
    assert not any("FAILED" in (describe(e) or "") for e in events)
    assert run.last_verified_checkpoint.path == "hf-out/checkpoint-16"


def test_replay_names_a_rotated_checkpoint_and_never_counts_it_as_the_last_verified():
    from test_engine_watched_step import LAUNCH, RUN
    from tui.app.rows import verification_mark
    from tui.engine.ledger.events import field_names
    from tui.engine.ledger.state import replay

    launch = {"seq": 1, "t": 1.7e9, "event": "run_launched", "run": RUN}
    launch |= {k: v for k, v in LAUNCH.items() if k in field_names("run_launched")}
    events = [launch]
    for seq, step in ((2, 2), (3, 4)):
        events.append({"seq": seq, "t": 1.7e9 + seq, "event": "checkpoint_acknowledged",
                       "run": RUN, "path": f"hf-out/checkpoint-{step}", "step": step,
                       "mode": "hf", "held": f".itera-held/{step}-ab/checkpoint-{step}"})
    events += [{"seq": 4, "t": 1.7e9 + 4, "event": "checkpoint_verified", "run": RUN,
                "path": "hf-out/checkpoint-2", "ok": True, "step": 2},
               {"seq": 5, "t": 1.7e9 + 5, "event": "checkpoint_rotated", "run": RUN,
                "path": "hf-out/checkpoint-2", "step": 2, "verified": True},
               {"seq": 6, "t": 1.7e9 + 6, "event": "checkpoint_rotated", "run": RUN,
                "path": "hf-out/checkpoint-4", "step": 4, "verified": None}]
    run = replay(events).run(RUN)
    assert run.rotated == ("hf-out/checkpoint-2", "hf-out/checkpoint-4")
    assert run.last_verified_checkpoint is None  # gone from disk: nothing to resume from
    assert [c.held for c in run.checkpoints] == [".itera-held/2-ab/checkpoint-2",
                                                 ".itera-held/4-ab/checkpoint-4"]
    assert [verification_mark(run, c) for c in run.checkpoints] == ["✓", "↻"]
    assert "rotated away by the trainer before it could be read (not a verification " \
           "failure)" in describe(events[-1])


def test_a_held_folder_the_run_made_a_link_is_never_linked_or_removed_through(tmp_path):
    from tui.campaign.held import HELD_DIR, hold, release

    run_dir, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    run_dir.mkdir()
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("not the run's")
    (run_dir / "model.pt").write_bytes(b"weights")
    (run_dir / HELD_DIR).symlink_to(elsewhere)
    assert hold(run_dir, "model.pt", "1-ab") is None
    release(run_dir, f"{HELD_DIR}/x/keep.txt")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]
