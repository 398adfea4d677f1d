"""The scheduler as a pure function of a plan and a replayed ledger: phases are
enums that are still plain strings, and a paused queue launches nothing new."""

import json

from enginekit import printer_cmd, write_plan
from tui.campaign import load_plan
from tui.engine.scheduler import Phase, next_intents, phase_of
from tui.engine.ledger.state import RunStatus, replay

VARIANTS = f"""
[[variant]]
id = "control"
category = "mandatory"
command = {printer_cmd("--steps", "5")}
minutes = 1

[[variant]]
id = "extra"
category = "useful"
command = {printer_cmd("--steps", "5")}
minutes = 1
"""


def launched(target, seq, t=2.0):
    return {"seq": seq, "t": t, "event": "run_launched", "run": f"{target}-run-1",
            "target": target, "kind": "run", "category": "mandatory", "attempt": 1,
            "config_hash": "h", "pid": 1}


def test_a_paused_queue_offers_nothing_and_a_resumed_one_offers_the_runs(tmp_path):
    # README: "`p` pause / resume the queue (running runs go on)"
    plan = load_plan(write_plan(tmp_path, VARIANTS))
    start = [{"seq": 1, "t": 1.0, "event": "campaign_started"}]
    assert [i.target for i in next_intents(plan, replay(start))] == ["control", "extra"]
    paused = start + [{"seq": 2, "t": 2.0, "event": "queue_paused"}]
    assert next_intents(plan, replay(paused)) == []
    resumed = paused + [{"seq": 3, "t": 3.0, "event": "queue_resumed"}]
    assert [i.target for i in next_intents(plan, replay(resumed))] == ["control", "extra"]


def test_pausing_leaves_a_running_run_running(tmp_path):
    plan = load_plan(write_plan(tmp_path, VARIANTS))
    events = [{"seq": 1, "t": 1.0, "event": "campaign_started"}, launched("control", 2),
              {"seq": 3, "t": 3.0, "event": "queue_paused"}]
    state = replay(events)
    assert next_intents(plan, state) == []
    assert [r.id for r in state.running] == ["control-run-1"]


def test_phases_and_run_states_are_enums_that_are_plain_strings(tmp_path):
    plan = load_plan(write_plan(tmp_path, VARIANTS))
    state = replay([{"seq": 1, "t": 1.0, "event": "campaign_started"}, launched("control", 2)])
    phase = phase_of(plan, state)
    assert phase is Phase.RUNS and phase == "runs"
    run = state.runs[0]
    assert run.state is RunStatus.RUNNING and run.state == "running"
    assert json.dumps({"phase": phase, "state": run.state}) == \
        '{"phase": "runs", "state": "running"}'
    exited = replay([{"seq": 1, "t": 1.0, "event": "campaign_started"}, launched("control", 2),
                     {"seq": 3, "t": 3.0, "event": "run_exited", "run": "control-run-1",
                      "exit_code": 0}])
    assert exited.runs[0].state is RunStatus.COMPLETED
