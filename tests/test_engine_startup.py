"""Start-up is not a stall (issue 34, item 1).

A process importing torch, loading a model or waiting on a torchrun rendezvous
writes no record for a while; the `stall` clock starts at the first record and
before it the start-up limit applies (`[[stop]] startup_minutes`, 30 min by
default), whose stop is named "start-up". A challenger that produced no record
never makes a firm "no": the verdict is inconclusive and says why.
"""

import json

import pytest

from clikit import check
from clikit import cli
from enginekit import drive, printer_cmd, write_plan
from test_engine_verdict import WRAPPED, completed, full, plan_of, replay
from tui.campaign import load_plan
from tui.campaign.plan import StopRule
from tui.engine.conclusion.outcome import Conclusion
from tui.engine.conclusion.verdict import verdict_of
from tui.engine.rules import RuleSet


def late(seconds: int, *args: str) -> str:
    """A command whose first record comes `seconds` after its start, as a launcher
    rendezvousing or a script loading a model would (the shell execs the script)."""
    script = " ".join(["exec", "python", "scripts/printer.py", *args])
    return json.dumps(["sh", "-c", f"sleep {seconds}; {script}"])


def test_the_stall_clock_starts_at_the_first_record_and_start_up_has_its_own_limit():
    rules = RuleSet((StopRule(rule="stall", minutes=1.0),), "v", "run")
    # 20 min without a first record: still starting (the default start-up limit is 30)
    assert rules.on_tick(now=1200.0, started=0.0, last_record=None,
                         verified_checkpoint=False, phase="run") is None
    stop = rules.on_tick(now=1900.0, started=0.0, last_record=None,
                         verified_checkpoint=False, phase="run")
    assert stop is not None and stop.rule == "start-up"
    assert "start-up limit 30 min" in stop.reason
    # after the first record the stall limit counts from the last one
    assert rules.on_tick(now=1900.0, started=0.0, last_record=1850.0,
                         verified_checkpoint=False, phase="run") is None
    assert rules.on_tick(now=1911.0, started=0.0, last_record=1850.0,
                         verified_checkpoint=False, phase="run").rule == "stall"
    longer = RuleSet((StopRule(rule="stall", minutes=45.0),), "v", "run")
    assert longer.on_tick(now=2400.0, started=0.0, last_record=None,
                          verified_checkpoint=False, phase="run") is None  # the longer limit


def test_check_shows_the_start_up_limit_and_reads_startup_minutes(tmp_path):
    path = write_plan(tmp_path, f"""
    [[variant]]
    id = "v"
    category = "mandatory"
    command = {printer_cmd()}
    minutes = 1
    """, '[[stop]]\nrule = "stall"\nminutes = 2\n\n'
         '[[stop]]\nrule = "stall"\nminutes = 2\nstartup_minutes = 90\n')
    plan = load_plan(path)
    assert [s.startup_limit_minutes for s in plan.stops] == [30.0, 90.0]
    out = check(str(path)).stdout
    assert ("stop rule: stall (every run): 2 min without a record, counted from the first "
            "record; before it the start-up limit is 30 min (default: 30 min or the stall "
            "limit if longer; set [[stop]] startup_minutes)") in out
    assert "start-up limit is 90 min (startup_minutes = 90)" in out
    data = json.loads(check("--json", str(path)).stdout)
    assert len(data["startup_limits"]) == 2


def test_a_challenger_stopped_by_a_timed_rule_before_any_record_is_inconclusive(tmp_path):
    """A ledger of an engine that let `stall` fire before the first record: the
    challenger trained on nothing, so its stop answers nothing."""
    plan = plan_of(tmp_path)

    def stalled(seq, rid):
        return [{"seq": seq + 1, "t": 2.0, "event": "stop_rule_fired", "run": rid,
                 "rule": "stall", "reason": "no metrics record for 5.0 min", "value": 300.0,
                 "step": None},
                {"seq": seq + 2, "t": 3.0, "event": "run_exited", "run": rid,
                 "exit_code": -15}]
    state = replay(full(1, "control", completed) + full(10, "lora16", completed)
                   + full(20, "lora64", stalled) + WRAPPED)
    no = Conclusion("no variant completed to compare with the control", (), 0.8,
                    {"control": 0.8, "lora16": 0.7}, True)
    v = verdict_of(plan, state, no)
    assert v.kind == "inconclusive", v
    assert "lora64 produced no record before its stall stop" in v.reason


@pytest.mark.slow
def test_a_slow_start_is_not_a_stall_and_a_start_up_stop_is_inconclusive(tmp_path):
    path = write_plan(tmp_path, f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--steps", "20")}
    minutes = 1

    [[variant]]
    id = "slow"
    category = "useful"
    command = {late(3, "--steps", "20")}
    minutes = 1

    [[variant]]
    id = "never"
    category = "useful"
    command = {late(600, "--steps", "20")}
    minutes = 1
    """, """
    [[stop]]
    rule = "stall"
    minutes = 0.02

    [[stop]]
    rule = "stall"
    minutes = 0.02
    startup_minutes = 0.05
    variants = ["never"]
    """, gpus=3)
    # the same acc for all: no winner, so only the stopped challenger can make it a "no"
    path.write_text(path.read_text().replace('metric = "acc"', 'metric = "acc"\nmin_gain = 0.1'))
    engine = drive(path, timeout=120)
    runs = {r.target: r for r in engine.state.runs if r.kind == "run"}
    # 3 s of start-up against a 1.2 s stall limit: not a stall, it trained to the end
    assert runs["slow"].state == "completed" and runs["slow"].stop is None, runs["slow"]
    never = runs["never"]
    assert never.state == "stopped" and never.stop.rule == "start-up", never
    assert "start-up limit 0.05 min" in never.stop.reason
    data = json.loads(cli("status", "--json", str(path), cwd=tmp_path).stdout)
    assert data["verdict"]["verdict"] == "inconclusive", data["verdict"]
    assert "never produced no record (stopped at start-up" in data["verdict"]["reason"]
    text = cli("status", str(path), cwd=tmp_path).stdout
    assert "start-up" in text
