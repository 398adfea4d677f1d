"""Kill -9 of the headless engine mid-run, then start it again: nothing is lost."""

import json

import psutil
import pytest

from enginekit import drive, kill_9_headless_when, printer_cmd, wait_for, write_plan
from tui.engine import read_ledger

pytestmark = pytest.mark.slow  # process tests: real runs, engines, verifiers


def metrics_lines(run_dir):
    path = run_dir / "metrics.jsonl"
    return path.read_text().splitlines() if path.exists() else []


def test_kill_9_of_headless_leaves_the_run_alone_and_restart_reattaches(tmp_path):
    variants = f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--jsonl", "--steps", "150", "--sleep", "0.02")}
    minutes = 1
    """
    path = write_plan(tmp_path, variants, '[[stop]]\nrule = "non_finite"\n')
    ledger_path = tmp_path / ".itera" / "ledger.jsonl"

    def trained_20_steps():
        launched = [e for e in read_ledger(ledger_path) if e["event"] == "run_launched"]
        return bool(launched) and len(metrics_lines(
            tmp_path / ".itera" / "runs" / launched[0]["run"])) >= 20

    kill_9_headless_when(path, trained_20_steps, what="20 records")
    launched = next(e for e in read_ledger(ledger_path) if e["event"] == "run_launched")
    run_dir = tmp_path / ".itera" / "runs" / launched["run"]
    # the run was not touched: same process, still training
    proc = psutil.Process(launched["pid"])
    assert abs(proc.create_time() - launched["pid_start"]) < 0.05
    assert proc.status() != psutil.STATUS_ZOMBIE
    seen_before = len(metrics_lines(run_dir))
    assert seen_before < 150

    engine = drive(path, timeout=60)
    ledger = read_ledger(ledger_path)
    assert [e["run"] for e in ledger if e["event"] == "run_reattached"] == [launched["run"]]
    assert sum(1 for e in ledger if e["event"] == "run_launched") == 1  # same id continues
    run = engine.state.run(launched["run"])
    assert run.state == "completed" and run.exit_code == 0
    steps = [json.loads(line)["step"] for line in metrics_lines(run_dir)]
    assert steps == list(range(1, 151))  # no record lost, none twice
    view = engine.live_view(launched["run"])
    assert view.records == 150 and view.last_step == 150


def test_a_run_that_ends_while_nobody_watches_keeps_its_exit_status(tmp_path):
    variants = f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--jsonl", "--steps", "30", "--sleep", "0.02")}
    minutes = 1
    """
    path = write_plan(tmp_path, variants)
    from tui.campaign import load_plan
    from tui.engine import Engine

    engine = Engine(load_plan(path), poll_interval=0.05).open()
    engine.tick()  # launches
    rid = engine.state.running[0].id
    engine.close()  # the control room goes away; the run does not
    wait_for(lambda: (tmp_path / ".itera" / "runs" / rid / "exit.json").exists(),
             what="exit file")
    engine = drive(path)
    run = engine.state.run(rid)
    assert run.state == "completed" and run.exit_code == 0
    exited = [e for e in read_ledger(tmp_path / ".itera" / "ledger.jsonl")
              if e["event"] == "run_exited"]
    assert "while the control room was down" in exited[0]["note"]


def test_second_engine_on_the_same_campaign_is_refused(tmp_path):
    path = write_plan(tmp_path, f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--steps", "3")}
    minutes = 1
    """)
    from tui.campaign import load_plan
    from tui.engine import Engine, EngineError

    first = Engine(load_plan(path)).open()
    try:
        try:
            Engine(load_plan(path)).open()
            raise AssertionError("second engine should be refused")
        except EngineError as exc:
            assert "another itera-tui" in str(exc)
    finally:
        first.close()
