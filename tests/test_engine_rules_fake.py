"""Stop rules on the fake processes of the engine's process port: each rule stops the
run it should, at the step it should, and says why; the SIGKILL comes exactly one
grace after the stop request's own stamp. No process is started (tests/fakeprocs.py
plays tests/scripts/printer.py on the test's clocks); tests/test_engine_rules.py keeps
the real NaN-to-killpg runs."""

import signal

import pytest

from enginekit import printer_cmd, printer_plan, write_plan
from fakeprocs import drive_plan
from tui.engine import read_ledger

def the_run(engine):
    (run,) = [r for r in engine.state.runs if r.kind == "run"]
    return run

def ledger(tmp_path):
    return read_ledger(tmp_path / ".itera" / "ledger.jsonl")

def test_nan_loss_at_step_40_is_stopped_by_non_finite_at_step_40(tmp_path):
    path = printer_plan(tmp_path, ["--steps", "400", "--nan-at", "40"],
                       '[[stop]]\nrule = "non_finite"\nmetrics = ["loss"]\n')
    engine, procs = drive_plan(path)
    run = the_run(engine)
    assert run.state == "stopped"
    assert (run.stop.rule, run.stop.step, run.stop.value) == ("non_finite", 40, "nan")
    events = [e["event"] for e in ledger(tmp_path)]
    assert events.index("stop_rule_fired") < events.index("run_stop_requested")
    assert [sig for sig, _ in procs.run(run.id).signals] == ["SIGTERM"]
    assert run.exit_code == -signal.SIGTERM

@pytest.mark.parametrize("spelling", ["inf", "NaN", "-Infinity"])
def test_every_printed_spelling_of_non_finite_is_seen(tmp_path, spelling):
    path = printer_plan(tmp_path, ["--steps", "400", "--nan-at", "5",
                                  f"--nan-spelling={spelling}"], '[[stop]]\nrule = "non_finite"\n')
    run = the_run(drive_plan(path)[0])
    assert (run.stop.rule, run.stop.step) == ("non_finite", 5)

def test_truncated_mandatory_inputs_stop_the_run(tmp_path):
    path = printer_plan(tmp_path, ["--steps", "400", "--truncated", "3"],
                       '[[stop]]\nrule = "truncation"\nmetric = "truncated"\nmax = 0\n')
    run = the_run(drive_plan(path)[0])
    assert run.stop.rule == "truncation" and run.stop.value == 3

def test_quality_below_threshold_after_its_step_bound(tmp_path):
    stops = '[[stop]]\nrule = "threshold"\nmetric = "acc"\nbelow = 0.3\nfrom_step = 20\n'
    path = printer_plan(tmp_path, ["--steps", "400", "--acc-drop-at", "25"], stops)
    run = the_run(drive_plan(path)[0])
    assert run.stop.rule == "threshold" and run.stop.step == 25

def test_threshold_is_not_applied_before_its_step_bound(tmp_path):
    stops = '[[stop]]\nrule = "threshold"\nmetric = "acc"\nbelow = 0.3\nfrom_step = 50\n'
    path = printer_plan(tmp_path, ["--steps", "40", "--acc-drop-at", "10"], stops)
    run = the_run(drive_plan(path)[0])
    assert run.state == "completed" and run.stop is None and run.exit_code == 0

def test_a_run_that_ignores_sigterm_is_killed_exactly_one_grace_after_the_request(tmp_path):
    """The grace is counted from the stop request's own ledger stamp, on the monotonic
    clock: the SIGKILL comes at the first tick at or past it, never a tick before."""
    path = printer_plan(tmp_path, ["--steps", "4000", "--nan-at", "5", "--ignore-sigterm"],
                       '[[stop]]\nrule = "non_finite"\n')
    engine, procs = drive_plan(path)
    run = the_run(engine)
    events = ledger(tmp_path)
    (asked,) = [e for e in events if e["event"] == "run_stop_requested"]
    (killed,) = [e for e in events if e["event"] == "run_killed"]
    grace = 1.0  # write_plan's [engine] grace_seconds
    assert asked["deadline"] == pytest.approx(asked["t"] + grace, abs=1e-9)
    (term, kill) = procs.run(run.id).signals
    assert term[0] == "SIGTERM" and kill[0] == "SIGKILL"
    waited = kill[1] - term[1]
    assert grace - 1e-9 <= waited < grace + 0.05  # the first tick at or past it (0.05 s apart)
    assert killed["after_s"] == pytest.approx(waited, abs=1e-6)
    assert run.state == "stopped" and run.exit_code == -signal.SIGKILL
    assert not (tmp_path / ".itera/runs" / run.id / "exit.json").exists()

def test_a_run_that_stops_printing_is_stopped_by_stall(tmp_path):
    path = printer_plan(tmp_path, ["--steps", "400", "--stall-at", "5"],
                       '[[stop]]\nrule = "stall"\nminutes = 0.02\n')
    run = the_run(drive_plan(path)[0])
    assert run.stop.rule == "stall"

def test_rules_can_target_printer_plan(tmp_path):
    variants = f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--steps", "20", "--nan-at", "5")}
    minutes = 1

    [[variant]]
    id = "other"
    category = "useful"
    command = {printer_cmd("--steps", "400", "--nan-at", "5")}
    minutes = 1
    """
    path = write_plan(tmp_path, variants, '[[stop]]\nrule = "non_finite"\nvariants = ["other"]\n')
    engine, _ = drive_plan(path)
    assert {r.target: r.state for r in engine.state.runs} == {"control": "completed",
                                                             "other": "stopped"}

def test_no_verified_checkpoint_within_n_minutes_fires_resume(tmp_path):
    path = printer_plan(tmp_path, ["--steps", "4000", "--sleep", "0.01"],
                       '[[stop]]\nrule = "resume"\nwithin_minutes = 0.02\n')
    run = the_run(drive_plan(path)[0])
    assert run.stop.rule == "resume"
    assert "no verified checkpoint within 0.02 min" in run.stop.reason
