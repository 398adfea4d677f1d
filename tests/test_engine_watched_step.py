"""A watched file whose name carries no step takes the step its training state holds.

`last.ckpt` (Lightning) or `model.pt` say nothing of their step; the verifier
reads it from the file (a Lightning checkpoint's `global_step`, an HF
`trainer_state.json`) and the replayed state gives the acknowledged checkpoint
that step, so events, the resume rule and the report do not say "step None".
"""

import pytest

from tui.engine.ledger.events import EVENT_TYPES, field_names

SCHEMAS = {kind: field_names(kind) for kind in EVENT_TYPES}
from tui.engine.ledger.state import replay

RUN = "control-abc-1"
LAUNCH = {"target": "control", "kind": "run", "category": "mandatory", "attempt": 1,
          "config_hash": "abc", "config": {"argv": ["python"], "params": {}}, "pid": 1234,
          "pid_start": 1.7e9, "lanes": ["cpu:0"], "devices": "0", "lot": "cpu",
          "max_steps": None}


def _events(step, verified_ok=True):
    launch = {"seq": 1, "t": 1.7e9, "event": "run_launched", "run": RUN}
    launch |= {k: v for k, v in LAUNCH.items() if k in SCHEMAS["run_launched"]}
    return [launch,
            {"seq": 2, "t": 1.7e9 + 5, "event": "checkpoint_acknowledged", "run": RUN,
             "path": "ckpt/last.ckpt", "step": step, "mode": "watched", "bytes": 10},
            {"seq": 3, "t": 1.7e9 + 6, "event": "checkpoint_verified", "run": RUN,
             "path": "ckpt/last.ckpt", "ok": verified_ok, "problem": None, "step": 40}]


def test_the_verified_step_fills_a_stepless_watched_checkpoint():
    [ack] = replay(_events(None)).run(RUN).checkpoints
    assert ack.step == 40 and ack.path == "ckpt/last.ckpt"


def test_a_named_step_or_a_failed_verdict_is_kept_as_it_was():
    [ack] = replay(_events(12)).run(RUN).checkpoints
    assert ack.step == 12
    [ack] = replay(_events(None, verified_ok=False)).run(RUN).checkpoints
    assert ack.step is None


@pytest.mark.slow
def test_a_stepless_watched_file_takes_the_step_of_the_last_record_read(tmp_path):
    """`model.pt` with no step in its name or content: the step of the last record the
    engine had read when it appeared, in the ledger, its line and the state."""
    pytest.importorskip("torch")
    from enginekit import drive, script_cmd, write_plan
    from tui.campaign import load_plan
    from tui.engine.ledger.file import read_ledger
    from tui.engine.ledger.lines import describe

    path = write_plan(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {script_cmd("stepless_save.py", "--steps", "14", "--save-at", "10")}
        minutes = 2

        [checkpoint]
        watch = ["model.pt"]
    """)
    engine = drive(path, timeout=120, verifications=True)
    (run,) = engine.state.runs
    events = list(read_ledger(load_plan(path).state_dir / "ledger.jsonl"))
    (ack,) = [e for e in events if e["event"] == "checkpoint_acknowledged"]
    assert ack["path"] == "model.pt" and ack["step"] == 10
    assert "at step 10" in describe(ack) and "None" not in describe(ack)
    assert [c.step for c in run.checkpoints] == [10]
