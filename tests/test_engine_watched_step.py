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


def test_the_run_is_dated_by_its_records_and_a_file_by_the_last_one_before_its_mtime():
    from tui.engine.watching.live import StepTimes

    times = StepTimes()
    times.extend([(10.0, 40), (11.0, 50)])
    times.extend([(12.0, 56)])  # 11.5 s, still 50: not a change
    assert [times.at(t) for t in (9.0, 10.0, 11.9, 12.0, 99.0)] == [None, 40, 50, 56, 56]


def test_a_file_naming_no_step_is_acknowledged_without_one_and_dated_by_its_mtime(tmp_path):
    """nanoGPT's `out/ckpt.pt` seen at step 56, written at 50: the acknowledgement claims
    no step (the verifier may read one inside), and carries the step its mtime gives;
    a step in the name is the step, and no date is asked for it."""
    import os

    from test_engine_watched import settle
    from tui.engine.checkpoints.watched import CheckpointWatcher

    (tmp_path / "out").mkdir()
    for name, mtime in (("out/ckpt.pt", 1000.5), ("out/step_40.pt", 999.0)):
        (tmp_path / name).write_bytes(b"weights")
        os.utime(tmp_path / name, (mtime, mtime))
    asked = []

    def step_at(t):
        asked.append(t)
        return 50 if t < 1001 else 56

    watcher = CheckpointWatcher(tmp_path, ["out/*.pt"], settle_s=0, scan_every_s=0)
    acks = {a["path"]: a for a in settle(watcher, 2000.0, writer_gone=True, step_at=step_at)}
    assert (acks["out/ckpt.pt"]["step"], acks["out/ckpt.pt"]["step_by_time"]) == (None, 50)
    assert acks["out/step_40.pt"]["step"] == 40 and "step_by_time" not in acks["out/step_40.pt"]
    assert asked == [1000.5]


@pytest.mark.parametrize("named, held, by_time, step", [
    (None, 50, 56, 50),     # what the file holds (nanoGPT's iter_num) wins over its date
    (None, None, 50, 50),   # a plain state_dict: the step by its mtime
    (300, None, 50, None),  # named in its file name: the acknowledgement keeps it
    (None, None, None, None),
])
def test_the_verified_step_is_the_files_then_its_date(named, held, by_time, step):
    from types import SimpleNamespace

    from tui.engine.checkpoints.queue import VerifyJob

    job = VerifyJob("r", "out/ckpt.pt", None, named, by_time)
    assert job.step_of(SimpleNamespace(step=held)) == step


@pytest.mark.parametrize("obj, held", [
    ({"iter_num": 50, "model": {}, "config": {"step": 3}}, ("iter_num", 50)),
    ({"global_step": 7, "step": 9}, ("global_step", 7)),
    ({"step": 12}, ("step", 12)),
    ({"step": True}, None), ({"step": -1}, None), ({"step": 1.5}, None), ({"w": 1}, None),
])
def test_the_step_a_saved_training_dict_holds_at_its_top_level(obj, held):
    from tui.training.loaders import held_step

    assert held_step(obj) == held


@pytest.mark.slow
def test_a_stepless_watched_file_takes_the_step_of_the_last_record_before_its_mtime(tmp_path):
    """`model.pt` with no step in its name or content: the step of the run's last record
    written before the file's mtime, in its verification and the state."""
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
    # its name says no step and its content might: none is claimed before the verifier
    assert ack["path"] == "model.pt" and ack["step"] is None
    # the records' estimate, said as one (issue 40, figure 5)
    assert "at about step 10 (by its records" in describe(ack) and "None" not in describe(ack)
    (verified,) = [e for e in events if e["event"] == "checkpoint_verified"]
    assert verified["ok"] and verified["step"] == 10  # the content holds none: by its mtime
    assert [c.step for c in run.checkpoints] == [10]


@pytest.mark.slow
def test_nanogpts_ckpt_pt_saved_at_the_pilots_bound_is_the_pilots_checkpoint(tmp_path):
    """nanoGPT's `out/ckpt.pt` (no step in its name) saved at iteration 50, a pilot's
    bound: the script trains on past it until its SIGTERM, so the engine sees the file
    a few iterations later. Its step is the `iter_num` it holds, 50, not the step at
    which it was seen, and the pilot's checkpoint is bundled, not refused as past its
    bound."""
    pytest.importorskip("torch")
    from test_never_mislead import tick_until
    from tui.campaign import load_plan
    from tui.engine import Engine
    from tui.engine.ledger.file import read_ledger

    path = nanogpt_campaign(tmp_path / "camp", "--eval_interval=50 --sleep=0.05", """
        [pilot]
        steps = 50
        decide = "ask"
    """)
    plan = load_plan(path)
    assert plan.metrics.preset == "nanogpt"
    engine = Engine(plan, poll_interval=0.05).open()
    try:
        tick_until(engine, lambda: engine.state.decision_pending is not None
                   and not engine.pending_verifications(), "the pilot's end, verified")
        state = engine.state
    finally:
        engine.close()
    (pilot,) = state.runs_of("control", "pilot")
    run_dir = plan.state_dir / "runs" / pilot.id
    events = read_ledger(plan.state_dir / "ledger.jsonl")
    seen = max(int(line.split()[1].rstrip(":")) for line in
               (run_dir / "stdout.log").read_text().splitlines() if line.startswith("iter "))
    assert seen > 50  # it trained past the bound before its SIGTERM
    (verified,) = [e for e in events if e["event"] == "checkpoint_verified"]
    assert verified["ok"] and verified["step"] == 50
    assert [(c.path, c.step) for c in pilot.checkpoints] == [("out/ckpt.pt", 50)]
    files = bundled(tmp_path, plan, pilot, run_dir)
    assert files.checkpoint == f"runs/{pilot.id}/out/ckpt.pt", files.checkpoint_note
    assert files.checkpoint_step == 50


def nanogpt_campaign(root, options: str, more: str = ""):
    """A campaign of one variant running nanoGPT's loop (tests/scripts/nanogpt_ckpt.py)
    with `options` (its `--key=value` ones), its `out/ckpt.pt` watched; `more`: TOML."""
    import json
    import textwrap

    from test_never_mislead import campaign

    command = ["sh", "-c", 'exec python scripts/nanogpt_ckpt.py --out_dir="$ITERA_RUN_DIR/out" '
                           + options]
    return campaign(root, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {json.dumps(command)}
        minutes = 2
        {textwrap.dedent(more)}
        [checkpoint]
        watch = ["out/ckpt.pt"]
    """, metric="val_loss", direction="min", metrics='[metrics]\npreset = "nanogpt"\n')


def bundled(tmp_path, plan, run, run_dir):
    """The run's files as the wrap-up copies them into a bundle under tmp_path/bundle."""
    from tui.bundle.paths import LogRedactor, Scrubber
    from tui.bundle.runfiles import copy_run
    from tui.bundle.stage import Stager

    stager = Stager(tmp_path / "bundle", Scrubber(plan.root), LogRedactor(plan.root))
    return copy_run(plan, run, run_dir, stager, progress=lambda _: None)


def test_a_stepless_watched_file_is_acknowledged_at_about_the_step_of_its_records(tmp_path):
    """nanoGPT's `ckpt.pt` names no step: until its verifier reads `iter_num`, the ledger,
    the events and the room's run screen said nothing of its step ("no step recorded
    yet", "step ?"). The step of the run's last record before the file's mtime is known
    at once: said as such, an estimate by the records, and the held step once verified
    (issue 40, figure 5)."""
    from types import SimpleNamespace

    from tui.app.run_detail import _checkpoints
    from tui.engine.checkpoints.requests import Checkpoints
    from tui.engine.ledger.events import CheckpointAcknowledged, CheckpointVerified, RunLaunched
    from tui.engine.ledger.file import read_ledger
    from tui.engine.ledger.journal import Journal

    journal = Journal(tmp_path / "ledger.jsonl", lambda: 1.7e9)
    journal.open()
    journal.record(RunLaunched(run=RUN, target="control", kind="run", category="mandatory",
                               attempt=1, config_hash="abc"))
    queued = []
    verifier = SimpleNamespace(runs_dir=tmp_path / "runs",
                               submit=lambda *a, **k: queued.append(a))
    Checkpoints(None, journal, None, verifier).acknowledge(RUN, [
        {"t": 1.7e9, "event": "checkpoint", "path": "out/ckpt.pt", "sha256": "ab" * 32,
         "bytes": 10, "mode": "watched", "step": None, "held": "w-1", "step_by_time": 249}])
    (ack,) = [e for e in read_ledger(journal.path) if isinstance(e, CheckpointAcknowledged)]
    assert ack.step is None  # never claimed as the step it holds
    assert "at about step 249 (by its records" in ack.describe(), ack.describe()
    assert ack.step_by_time == 249 and queued
    facts = dict(_checkpoints(journal.state.run(RUN), 1.7e9 + 5)[1:2])
    assert "about step 249 (by its records)" in facts[""], facts
    journal.record(CheckpointVerified(run=RUN, path="out/ckpt.pt", ok=True, step=250,
                                      sha256="ab" * 32, held="w-1"))
    (said,) = [line for _, line in _checkpoints(journal.state.run(RUN), 1.7e9 + 9)[1:]]
    assert "step 250" in said and "about" not in said, said
