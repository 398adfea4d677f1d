"""Stop rules on real processes: a NaN run stopped through its process group (SIGTERM,
and SIGKILL after the grace for one that ignores it), and a resume check's verdict.
Every other rule is tested on the engine's fake processes (test_engine_rules_fake.py)."""

import signal

import pytest

from enginekit import drive, printer_cmd, printer_plan, write_plan
from tui.engine import read_ledger

pytestmark = pytest.mark.slow  # process tests: real runs, engines, verifiers

def stopped_run(engine):
    runs = [r for r in engine.state.runs if r.kind == "run"]
    assert len(runs) == 1
    return runs[0]

def test_nan_loss_at_step_40_is_stopped_by_non_finite(tmp_path):
    path = printer_plan(tmp_path, ["--steps", "400", "--nan-at", "40"],
                       '[[stop]]\nrule = "non_finite"\nmetrics = ["loss"]\n')
    run = stopped_run(drive(path))
    assert run.state == "stopped"
    assert run.stop.rule == "non_finite"
    assert run.stop.step == 40
    assert run.stop.value == "nan"
    events = [e["event"] for e in read_ledger(tmp_path / ".itera" / "ledger.jsonl")]
    assert events.index("stop_rule_fired") < events.index("run_stop_requested")

def test_a_run_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path):
    path = printer_plan(tmp_path, ["--steps", "4000", "--nan-at", "5", "--ignore-sigterm"],
                       '[[stop]]\nrule = "non_finite"\n')
    engine = drive(path)
    run = stopped_run(engine)
    ledger = read_ledger(tmp_path / ".itera" / "ledger.jsonl")
    killed = [e for e in ledger if e["event"] == "run_killed"]
    assert len(killed) == 1 and killed[0]["after_s"] >= 1.0
    # SIGKILL goes to the whole process group, the launcher included, so nothing is
    # left to write exit.json: the status is the launcher's own death by SIGKILL
    assert not (tmp_path / ".itera/runs" / run.id / "exit.json").exists()
    assert run.state == "stopped" and run.stop.rule == "non_finite"
    assert run.exit_code == -signal.SIGKILL
    (exited,) = [e for e in ledger if e["event"] == "run_exited"]
    assert exited["exit_code"] == -signal.SIGKILL

def test_a_failed_resume_check_fires_resume_on_the_check(tmp_path):
    import json
    import sys

    script = tmp_path / "bad_resume.py"
    script.write_text(
        "import json, os, time\n"
        "with open(os.environ['ITERA_METRICS'], 'a') as f:\n"
        "    f.write(json.dumps({'t': time.time(), 'step': 20, 'event': 'resume_check',\n"
        "                        'ok': False, 'steps_compared': 10, 'max_abs_diff': 0.25,\n"
        "                        'problem': 'loss differs at step 21'}) + '\\n')\n"
        "time.sleep(30)\n")
    variants = f"""
    [[step]]
    id = "resume_check"
    kind = "resume_check"
    minutes = 1
    command = {json.dumps([sys.executable, str(script)])}

    [[variant]]
    id = "v"
    category = "mandatory"
    command = {printer_cmd("--steps", "3")}
    minutes = 1
    """
    path = write_plan(tmp_path, variants, '[[stop]]\nrule = "resume"\nwithin_minutes = 30\n')
    engine = drive(path)
    check = next(r for r in engine.state.runs if r.target == "resume_check")
    assert check.state == "stopped" and check.stop.rule == "resume"
    assert "loss differs at step 21" in check.stop.reason
    assert check.resume_check.ok is False
