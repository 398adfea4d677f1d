"""Whole campaigns over the frameworks people train with, through the real engine.

Real transformers and Lightning from the package registry, tiny models built from
a config, data made in the script; the user's code changes by one line at most
(`callbacks=[IteraCallback()]`), or not at all (`[checkpoint] watch`).
"""

from __future__ import annotations

import textwrap

import pytest

from conftest import REPO
from enginekit import copy_scripts, drive, script_cmd
from tui.campaign import load_plan
from tui.engine.ledger.file import read_ledger
from tui.engine.conclusion.outcome import budget
from tui.training.resume_check import read_records

pytestmark = pytest.mark.slow
SCRIPTS = REPO / "tests" / "scripts"


def campaign(root, variants: str, extra: str = "") -> object:
    copy_scripts(root)
    path = root / "campaign.toml"
    path.write_text(textwrap.dedent("""
        [campaign]
        name = "frameworks"
        question = "does it hold on code nobody here wrote?"
        metric = "loss"
        direction = "min"

        [[lot]]
        gpu = "cpu"
        hours = 1
        price_usd = 1.0

        [engine]
        grace_seconds = 5.0
    """) + textwrap.dedent(variants) + textwrap.dedent(extra))
    return path


def argv(script: str, *args: str) -> str:
    return script_cmd(script, *args)  # campaign-relative, as users write it


def test_hf_trainer_nan_weights_at_step_15_are_stopped_at_that_record_and_not_accepted(
        tmp_path):
    path = campaign(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {argv("hf_train.py", "--steps", "40", "--nan-at", "15", "--sleep", "0.1",
                        "--output-dir", "{run_dir}/hf-out")}
        minutes = 5

        [[stop]]
        rule = "non_finite"
        metrics = ["loss", "grad_norm"]
    """)
    engine = drive(path, timeout=240)
    (run,) = engine.state.runs
    assert run.state == "stopped" and run.stop.rule == "non_finite"
    assert run.stop.step == 15  # the first logged record after the weights went NaN
    assert "step 15" in run.stop.reason
    plan = load_plan(path)
    b = budget(plan, engine.state, plan.state_dir / "runs")
    assert not b.accepted and b.per_deliverable_usd is None
    assert any("non_finite" in r.cause for r in b.rejections)
    # stopped at that record while it trained (0.1 s a step: 2.5 s before its own end),
    # not judged after it had run its 40 steps: the rule's SIGTERM came before its exit
    events = [(e["event"], e.get("by")) for e in read_ledger(plan.state_dir / "ledger.jsonl")]
    assert events.index(("stop_rule_fired", None)) < events.index(("run_stop_requested",
                                                                   "rule"))
    assert events.index(("run_stop_requested", "rule")) < events.index(("run_exited", None))
    steps = [r["step"] for r in read_records(plan.state_dir / "runs" / run.id / "metrics.jsonl")
             if isinstance(r.get("step"), int)]
    assert steps and max(steps) < 40


def test_hf_trainer_that_only_prints_is_read_by_its_preset_and_its_nan_stopped(tmp_path):
    # zero lines of change: the Trainer's own printed logs (NaN filter on: the loss
    # prints as 0, grad_norm as nan), read through `preset = "hf_trainer"`
    path = campaign(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {argv("hf_nan_print.py", "--steps", "40", "--nan-at", "15",
                        "--logging-steps", "1")}
        minutes = 5

        [metrics]
        preset = "hf_trainer"

        [[stop]]
        rule = "non_finite"
    """)
    engine = drive(path, timeout=240)
    (run,) = engine.state.runs
    assert run.state == "stopped" and run.stop.rule == "non_finite", run
    assert "grad_norm" in run.stop.reason  # the printed loss hides the NaN; grad_norm shows it
    # the weights go NaN after step 15: step 16 is the first logged NaN, dated by the bar's
    # redraw after its dict (no trainer_state.json: the script never saves)
    assert run.stop.step == 16 and run.stop.reason.endswith("at step 16"), run.stop
    from tui.bundle.plots import read_series

    series = read_series(load_plan(path), load_plan(path).state_dir / "runs" / run.id, "loss")
    assert [s for s, _ in series][:16] == list(range(1, 17))  # its loss figure, at its steps
    plan = load_plan(path)
    b = budget(plan, engine.state, plan.state_dir / "runs")
    assert not b.accepted and any("non_finite" in r.cause for r in b.rejections)


def test_lightning_modelcheckpoint_with_no_callback_satisfies_resume_and_is_bundled(tmp_path):
    # zero lines of change: Lightning's own ModelCheckpoint, found by `[checkpoint] watch`
    path = campaign(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {argv("lightning_train.py", "--steps", "400", "--model-checkpoint",
                        "--every", "10", "--sleep", "0.05")}
        minutes = 5

        [checkpoint]
        watch = ["lightning-ckpts/*.ckpt"]

        [[stop]]  # the run trains for longer than this: without `watch` it would fire
        rule = "resume"
        within_minutes = 0.25
    """)
    from tui.session import CampaignSession

    plan = load_plan(path)
    engine = drive(path, timeout=240)
    (run,) = engine.state.runs
    assert run.state == "completed", run.why_ended  # the resume rule was satisfied
    assert run.checkpoints and all(c.mode == "watched" for c in run.checkpoints)
    assert run.last_verified_checkpoint is not None
    with CampaignSession(plan) as session:
        result = session.wrapup()
    assert result.ok, result
    bundled = [p.name for p in (tmp_path / "outputs/bundle/runs" / run.id).rglob("*.ckpt")]
    assert bundled, "the watched .ckpt is in the bundle"


def test_hf_checkpoint_asked_for_from_the_engine_is_a_verified_directory(tmp_path):
    import time

    from tui.engine import Engine

    path = campaign(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {argv("hf_train.py", "--steps", "400", "--sleep", "0.05",
                        "--output-dir", "{run_dir}/hf-out")}
        minutes = 5
    """)
    engine = Engine(load_plan(path), poll_interval=0.05).open()
    try:
        deadline = time.monotonic() + 180
        def until(what, predicate):
            while not predicate():
                assert time.monotonic() < deadline, f"timed out waiting for {what}"
                engine.tick()
                time.sleep(0.05)
        until("training", lambda: engine.state.running and engine.live_view(
            engine.state.running[0].id).records >= 3)
        rid = engine.state.running[0].id
        engine.request_checkpoint(rid)  # the `c` key
        until("a verdict", lambda: engine.state.run(rid).verified)
        run = engine.state.run(rid)
        assert run.checkpoints[0].mode == "hf"
        assert run.checkpoints[0].path.startswith("hf-out/checkpoint-")
        assert run.verified[0].ok is True, run.verified[0]
        engine.stop_run(rid, "enough")
        until("the exit", lambda: not engine.state.running)
    finally:
        engine.close()
