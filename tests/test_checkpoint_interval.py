"""The automatic checkpoint interval (README, `[checkpoint] every_minutes = "auto"`):
Young's sqrt(2 x write cost x MTBF) from the measured write cost, capped at twice
`tolerable_loss_minutes`, and the engine's schedule requesting a checkpoint of a
full run at that interval, on the real journal and control files, a fake clock."""

import json
import math

import pytest

from enginekit import printer_cmd, write_plan
from tui.campaign import load_plan
from tui.engine.checkpoints.interval import DEFAULT_INTERVAL_MINUTES, checkpoint_interval_minutes
from tui.engine.checkpoints.requests import Checkpoints
from tui.engine.runs.control import ControlFiles
from tui.engine.ledger.journal import Journal
from tui.engine.ledger.events import CheckpointAcknowledged, RunLaunched

VARIANT = f"""
[[variant]]
id = "v"
category = "mandatory"
command = {printer_cmd("--steps", "3")}
minutes = 600
"""


def plan_with(tmp_path, checkpoint: str):
    return load_plan(write_plan(tmp_path, VARIANT, "[checkpoint]\n" + checkpoint))


def young_min(cost_s: float, mtbf_h: float) -> float:
    return math.sqrt(2 * cost_s * mtbf_h * 3600) / 60


def test_auto_is_young_s_interval_from_the_measured_write_cost(tmp_path):
    plan = plan_with(tmp_path, 'every_minutes = "auto"\nmtbf_hours = 10\n')
    assert checkpoint_interval_minutes(plan.checkpoint, 2.0) == pytest.approx(
        young_min(2.0, 10))  # 8.94 min for a 2 s write and a 10 h MTBF
    assert checkpoint_interval_minutes(plan.checkpoint, 8.0) == pytest.approx(
        2 * young_min(2.0, 10))  # four times the cost: twice the interval
    assert checkpoint_interval_minutes(plan.checkpoint, None) == DEFAULT_INTERVAL_MINUTES


def test_auto_is_capped_at_twice_the_tolerable_loss(tmp_path):
    plan = plan_with(tmp_path, 'every_minutes = "auto"\ntolerable_loss_minutes = 3\n')
    assert checkpoint_interval_minutes(plan.checkpoint, 2.0) == 6.0  # Young says 9.8 min
    assert checkpoint_interval_minutes(plan.checkpoint, 0.01) == pytest.approx(
        young_min(0.01, 24))  # under the cap: Young's


def test_a_fixed_interval_or_none_is_used_as_written(tmp_path):
    assert checkpoint_interval_minutes(plan_with(tmp_path / "a", "every_minutes = 7\n")
                                       .checkpoint, 2.0) == 7
    assert checkpoint_interval_minutes(plan_with(tmp_path / "b", "").checkpoint, 2.0) is None


def test_the_engine_requests_a_checkpoint_when_the_auto_interval_is_over(tmp_path):
    plan = plan_with(tmp_path, 'every_minutes = "auto"\nmtbf_hours = 10\n')
    now = [1_000.0]
    plan.state_dir.mkdir()
    journal = Journal(plan.state_dir / "ledger.jsonl", lambda: now[0])
    journal.open()
    journal.record(RunLaunched(run="v-run", target="v", kind="run", category="mandatory",
                   attempt=1, config_hash="h", pid=None))
    journal.record(CheckpointAcknowledged(run="v-run", path="c.pt", sha256="ab",
                   write_s=2.0, step=1))
    (plan.state_dir / "runs" / "v-run").mkdir(parents=True)
    checkpoints = Checkpoints(plan, journal, ControlFiles(plan.state_dir / "runs"), None)
    run = journal.state.run("v-run")
    checkpoints.adopt(run, started_t=now[0])
    interval_s = young_min(2.0, 10) * 60
    assert checkpoints.interval_min() == pytest.approx(interval_s / 60)

    def requested():
        return [e for e in map(json.loads, (plan.state_dir / "ledger.jsonl").read_text()
                               .splitlines()) if e["event"] == "checkpoint_requested"]

    checkpoints.maybe_periodic(run, now[0] + interval_s - 1)
    assert requested() == []  # not yet
    now[0] += interval_s + 1
    checkpoints.maybe_periodic(run, now[0])
    (asked,) = requested()
    assert asked["run"] == "v-run" and asked["by"] == "schedule"
    control = (plan.state_dir / "runs" / "v-run" / "control.jsonl").read_text()
    assert "checkpoint" in control  # the run protocol's request, for the SDK to answer
    checkpoints.maybe_periodic(run, now[0] + 1)
    assert len(requested()) == 1  # the next one waits a whole interval again
