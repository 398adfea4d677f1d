"""Runs are told when the plan's `resume` rule needs a checkpoint (ITERA_FINAL_CHECKPOINT=1),
so the callbacks save the finished model; without the rule they are not."""

import json
import sys

import pytest

from enginekit import write_plan
from fakeprocs import FakeClock, FakeProcesses, drive_fake, tick_until
from tui.campaign import load_plan
from tui.engine import Engine

SHOW = json.dumps([sys.executable, "-c", "import os; print('final=' + "
                   "os.environ.get('ITERA_FINAL_CHECKPOINT', 'unset'))"])


@pytest.mark.parametrize("rule,expected", [
    ('\n[[stop]]\nrule = "resume"\nwithin_minutes = 30\n', "final=1"),
    ("", "final=unset"),
])
def test_the_resume_rule_asks_runs_for_a_final_checkpoint(tmp_path, rule, expected):
    path = write_plan(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {SHOW}
        minutes = 1
    """, extra=rule)
    clock = FakeClock()  # the run is a fake (tests/fakeprocs.py) that plays SHOW: the
    procs = FakeProcesses(clock)  # environment the engine hands it is the subject
    engine = Engine(load_plan(path), clock=clock.wall, monotonic=clock.mono,
                    poll_interval=0.05, processes=procs).open()
    try:
        tick_until(engine, procs, clock, lambda: procs.runs, "the run's launch")
        (fake,) = procs.runs
        fake.print("final=" + fake.env.get("ITERA_FINAL_CHECKPOINT", "unset"))
        fake.exit(0)
        drive_fake(engine, procs, clock)
    finally:
        engine.close()
    (run,) = engine.state.runs
    out = (tmp_path / ".itera" / "runs" / run.id / "stdout.log").read_text()
    assert out.strip() == expected
