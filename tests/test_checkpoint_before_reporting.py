"""`c` on a run that has not printed yet (issue 36, item 6).

It used to be refused with "it writes no SDK or framework-callback records": a
run still loading has written nothing, so nobody can tell yet whether it speaks
the SDK. Now the request is accepted, with words that say the run has not
started reporting yet; it waits in the run's control file, and the SDK answers
it once the run starts: a real torch run that starts reporting only when the
test lets it, and a checkpoint verified in a fresh process.
"""

from __future__ import annotations

import time

import pytest

from enginekit import write_plan
from servicekit import wait_until
from tui.campaign import load_plan
from tui.engine import read_ledger
from tui.session import CampaignSession

from conftest import needs

pytestmark = pytest.mark.slow

GATED = '''
import os, time
from pathlib import Path
gate = Path(os.environ["GATE"])
while not gate.exists():  # loading: nothing printed, nothing logged
    time.sleep(0.05)
import torch
from tui import training
run = training.attach()
model = torch.nn.Linear(4, 2)
for step in range(1, 100000):
    run.log(step, loss=2.0 / step, acc=0.5)
    if run.checkpoint_requested(step):
        run.save_checkpoint(model=model, step=step)
    if run.stop_requested():
        break
    time.sleep(0.05)
'''


@needs("torch")
def test_a_checkpoint_asked_before_the_run_reports_is_sent_and_answered(tmp_path,
                                                                       monkeypatch):
    gate = tmp_path / "go"
    monkeypatch.setenv("GATE", str(gate))
    (tmp_path / "gated.py").write_text(GATED)
    path = write_plan(tmp_path, """
        [[variant]]
        id = "control"
        category = "mandatory"
        command = ["python", "gated.py"]
        minutes = 5
    """)
    session = CampaignSession(load_plan(path), poll_interval=0.05).open()
    try:
        snap = wait_until(lambda: (s := session.step()).state.running and s, 60,
                          "the run launched")
        rid = snap.state.running[0].id
        asked = session.checkpoint(rid)
        assert asked.ok, asked.message
        assert "has not started reporting yet" in asked.message
        assert "no SDK" not in asked.message
        gate.touch()
        wait_until(lambda: session.step().state.run(rid).checkpoints, 120,
                   "the SDK to answer the request sent before it reported")
        assert session.step().state.run(rid).checkpoints[0].path
        ledger = tmp_path / ".itera" / "ledger.jsonl"
        wait_until(lambda: session.step() and any(
            e["event"] == "checkpoint_verified" and e.get("ok") and e.get("run") == rid
            for e in read_ledger(ledger)), 120,
                   "the checkpoint verified in a fresh process")
    finally:
        for run in session.step().state.running:
            session.stop(run.id, "test over")
        wait_until(lambda: not session.step().state.running, 60, "the run stopped")
        session.close()
