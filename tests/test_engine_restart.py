"""Kill -9 of the headless engine mid-run, then start it again: nothing is lost (a real
headless engine and run); an engine that closes and the next that opens, on the
engine's fake processes (tests/fakeprocs.py)."""

import json

import psutil
import pytest

from enginekit import control_only, drive, kill_9_headless_when, printer_cmd, write_plan
from fakeprocs import FakeClock, FakeProcesses, drive_fake, tick_until
from tui.engine import read_ledger


def metrics_lines(run_dir):
    path = run_dir / "metrics.jsonl"
    return path.read_text().splitlines() if path.exists() else []


# the real run's length: 20 records in, it has about 5.6 s left, for the kill -9, the checks
# and the next engine's open on a busy box; it must still be running when that engine looks
STEPS = 300


@pytest.mark.slow  # a real headless engine killed -9, a real run left alone
def test_kill_9_of_headless_leaves_the_run_alone_and_restart_reattaches(tmp_path):
    variants = f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--jsonl", "--steps", str(STEPS), "--sleep", "0.02")}
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
    assert seen_before < STEPS

    engine = drive(path, timeout=60)
    ledger = read_ledger(ledger_path)
    assert [e["run"] for e in ledger if e["event"] == "run_reattached"] == [launched["run"]]
    assert sum(1 for e in ledger if e["event"] == "run_launched") == 1  # same id continues
    run = engine.state.run(launched["run"])
    assert run.state == "completed" and run.exit_code == 0
    steps = [json.loads(line)["step"] for line in metrics_lines(run_dir)]
    assert steps == list(range(1, STEPS + 1))  # no record lost, none twice
    view = engine.live_view(launched["run"])
    assert view.records == STEPS and view.last_step == STEPS


def _fake_engine(path, procs, clock):
    from tui.campaign import load_plan
    from tui.engine import Engine

    return Engine(load_plan(path), poll_interval=0.05, clock=clock.wall,
                  monotonic=clock.mono, processes=procs).open()


def test_a_run_that_ends_while_nobody_watches_keeps_its_exit_status(tmp_path):
    """On the engine's fake processes (tests/fakeprocs.py): the run outlives its engine,
    ends with its launcher's exit.json, and the next engine records that exit."""
    path = write_plan(tmp_path, control_only(printer_cmd("--jsonl", "--steps", "30",
                                                         "--sleep", "0.02")))
    clock = FakeClock()
    procs = FakeProcesses(clock)
    engine = _fake_engine(path, procs, clock)
    engine.tick()  # launches
    rid = engine.state.running[0].id
    engine.close()  # the control room goes away; the run does not
    run = procs.run(rid)
    while run.alive:  # it trains to its end while nobody watches
        clock.advance(0.05)
        run.play()
    engine = drive_fake(_fake_engine(path, procs, clock), procs, clock)
    engine.close()
    run = engine.state.run(rid)
    assert run.state == "completed" and run.exit_code == 0
    exited = [e for e in read_ledger(tmp_path / ".itera" / "ledger.jsonl")
              if e["event"] == "run_exited"]
    assert "while the control room was down" in exited[0]["note"]
    assert not [e for e in read_ledger(tmp_path / ".itera" / "ledger.jsonl")
                if e["event"] == "run_reattached"]


def test_a_restarted_engine_reattaches_the_live_run_and_reads_on_where_it_left(tmp_path):
    """The run is still alive when the next engine opens: reattached (same pid and start),
    its records read on from where the first engine left them, none twice."""
    path = write_plan(tmp_path, control_only(printer_cmd("--jsonl", "--steps", "150",
                                                         "--sleep", "0.02")))
    clock = FakeClock()
    procs = FakeProcesses(clock)
    engine = _fake_engine(path, procs, clock)
    rid = tick_until(engine, procs, clock, lambda: engine.state.running and
                     engine.live_view(engine.state.running[0].id).records >= 20 and
                     engine.state.running[0].id, "20 records")
    engine.close()
    clock.advance(1.0)
    procs.play()  # it trained on while nobody watched
    engine = drive_fake(_fake_engine(path, procs, clock), procs, clock)
    engine.close()
    ledger = read_ledger(tmp_path / ".itera" / "ledger.jsonl")
    assert [e["run"] for e in ledger if e["event"] == "run_reattached"] == [rid]
    assert sum(1 for e in ledger if e["event"] == "run_launched") == 1
    run = engine.state.run(rid)
    assert run.state == "completed" and run.exit_code == 0
    view = engine.live_view(rid)
    assert view.records == 150 and view.last_step == 150
    steps = [json.loads(line)["step"] for line in metrics_lines(tmp_path / ".itera/runs" / rid)]
    assert steps == list(range(1, 151))


def test_second_engine_on_the_same_campaign_is_refused(tmp_path):
    from tui.engine import EngineError

    path = write_plan(tmp_path, control_only(printer_cmd("--steps", "3")))
    clock = FakeClock()
    procs = FakeProcesses(clock)
    first = _fake_engine(path, procs, clock)
    try:
        with pytest.raises(EngineError, match="another itera-tui"):
            _fake_engine(path, procs, clock)
    finally:
        first.close()
