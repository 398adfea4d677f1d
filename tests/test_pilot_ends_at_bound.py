"""A pilot ends at its bound, and every face shows its figure at the bound (issue 34, 6).

nanoGPT knows nothing of ITERA_MAX_STEPS or the control file. Its pilot got
SIGTERM only a grace after the bound, so a 100-step pilot trained hundreds of
steps more; the decision point showed the figure at the bound while the
report's pilot row read the overrun and the bundle took a checkpoint past the
bound. Now the engine sends SIGTERM at the bound (the grace only to exit), and
the decision point, the report (`final_metric` with `figure_bound`) and the
bundle (its checkpoint) all stop at the bound.
"""

from __future__ import annotations

import contextlib
import runpy
import sys
from unittest import mock

import pytest

from enginekit import script_cmd
from test_never_mislead import campaign, tick_until
from tui.bundle.paths import LogRedactor, Scrubber
from tui.bundle.runfiles import copy_run
from tui.bundle.stage import Stager
from tui.campaign import load_plan
from tui.engine import Engine
from tui.engine.conclusion.outcome import figure_bound, final_metric
from tui.engine.ledger.file import read_ledger
from tui.engine.ledger.state import replay

NANOGPT = '[metrics]\npreset = "nanogpt"\n'
PILOT = """
[[variant]]
id = "control"
category = "mandatory"
command = {command}
minutes = 1

[pilot]
steps = 100
decide = "ask"
"""


def _pilot(rid="control-p-1", max_steps=100, more=()):
    return replay([{"seq": 1, "t": 1.0, "event": "run_launched", "run": rid,
                    "target": "control", "kind": "pilot", "category": "mandatory",
                    "attempt": 1, "config_hash": "p", "max_steps": max_steps},
                   *more]).run(rid)


def test_the_report_reads_a_pilot_up_to_its_bound_like_the_decision_point(tmp_path):
    """Real nanoGPT-shaped output of 300 iters for a 100-step pilot: the report's figure
    is the val loss at step 100, not at 300."""
    path = campaign(tmp_path, PILOT.format(command=script_cmd("nanogpt_style.py")),
                    metric="val_loss", direction="min", metrics=NANOGPT)
    plan = load_plan(path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    script = tmp_path / "scripts" / "nanogpt_style.py"  # the real script, in this process
    with open(run_dir / "stdout.log", "w") as out, contextlib.redirect_stdout(out), \
            mock.patch.object(sys, "argv", [str(script), "--max-iters", "300", "--sleep", "0"]):
        runpy.run_path(str(script), run_name="__main__")
    pilot = _pilot()
    assert figure_bound(pilot) == 100
    at_100, at_300 = round(4.0 / (1 + 100 / 50) + 0.1, 4), round(4.0 / (1 + 300 / 50) + 0.1, 4)
    assert final_metric(plan, run_dir) == pytest.approx(at_300)  # a full run: everything
    assert final_metric(plan, run_dir, figure_bound(pilot)) == pytest.approx(at_100)
    assert figure_bound(replay([{"seq": 1, "t": 1.0, "event": "run_launched", "run": "r",
                                 "target": "control", "kind": "run", "category": "mandatory",
                                 "attempt": 1, "config_hash": "p"}]).run("r")) is None


def test_a_pilot_bundles_its_checkpoint_at_the_bound_never_one_past_it(tmp_path):
    camp = tmp_path / "camp"
    path = campaign(camp, PILOT.format(command=script_cmd("nanogpt_style.py")),
                    metric="val_loss", direction="min", metrics=NANOGPT)
    plan = load_plan(path)
    run_dir = camp / ".itera" / "runs" / "control-p-1"
    (run_dir / "checkpoints").mkdir(parents=True)
    events = []
    for seq, step in ((2, 100), (4, 300)):
        rel = f"checkpoints/step_{step}.pt"
        (run_dir / rel).write_bytes(b"weights at %d" % step)
        events += [{"seq": seq, "t": 2.0, "event": "checkpoint_acknowledged",
                    "run": "control-p-1", "path": rel, "step": step},
                   {"seq": seq + 1, "t": 2.5, "event": "checkpoint_verified",
                    "run": "control-p-1", "path": rel, "ok": True, "step": step}]
    pilot = _pilot(more=events)
    stager = Stager(tmp_path / "bundle", Scrubber(camp), LogRedactor(camp))
    files = copy_run(plan, pilot, run_dir, stager, progress=lambda _: None)
    assert files.checkpoint == "runs/control-p-1/checkpoints/step_100.pt", files
    assert files.checkpoint_step == 100


@pytest.mark.slow
def test_a_pilot_that_ignores_its_bound_gets_sigterm_at_the_bound(tmp_path):
    """A grace of 5 s: with SIGTERM only after it, nanoGPT (50 iters/s here) would train
    ~250 iters past the bound; SIGTERM at the bound leaves it a poll or two."""
    path = campaign(tmp_path, PILOT.format(command=script_cmd(
        "nanogpt_style.py", "--max-iters", "3000", "--eval-interval", "20", "--sleep", "0.2")),
        metric="val_loss", direction="min", metrics=NANOGPT)
    path.write_text(path.read_text().replace("grace_seconds = 2.0", "grace_seconds = 5.0"))
    engine = Engine(load_plan(path), poll_interval=0.05).open()
    try:
        tick_until(engine, lambda: engine.state.decision_pending is not None,
                   "the pilot's end")
        state = engine.state
    finally:
        engine.close()
    (pilot,) = state.runs_of("control", "pilot")
    ledger = read_ledger(tmp_path / ".itera" / "ledger.jsonl")
    (asked,) = [e for e in ledger if e["event"] == "run_stop_requested"]
    assert asked["by"] == "pilot_bound" and asked["signal"] == "SIGTERM", asked
    assert not [e for e in ledger if e["event"] == "run_killed"]  # it exited in its grace
    run_dir = tmp_path / ".itera" / "runs" / pilot.id
    iters = [int(line.split()[1].rstrip(":")) for line in
             (run_dir / "stdout.log").read_text().splitlines() if line.startswith("iter ")]
    assert 100 <= max(iters) < 200, max(iters)  # not the ~350 of a 5 s grace spent training
    figure = state.decision_pending.pilot["control"]["metric"]
    at_100 = round(4.0 / (1 + 100 / 50) + 0.1, 4)
    assert figure == pytest.approx(at_100)
    plan = load_plan(path)  # the report's pilot row: the same figure
    assert final_metric(plan, run_dir, figure_bound(pilot)) == pytest.approx(figure)
