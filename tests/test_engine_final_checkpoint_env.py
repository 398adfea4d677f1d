"""Runs are told when the plan's `resume` rule needs a checkpoint (ITERA_FINAL_CHECKPOINT=1),
so the callbacks save the finished model; without the rule they are not."""

import json
import sys

import pytest

from enginekit import drive, write_plan

pytestmark = pytest.mark.slow
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
    engine = drive(path, timeout=60)
    (run,) = engine.state.runs
    out = (tmp_path / ".itera" / "runs" / run.id / "stdout.log").read_text()
    assert out.strip() == expected
