"""A wall clock that steps (+3 h, then -2 h) while runs print stops no run.

Liveness (`stall`, `resume`, the grace before SIGKILL) is measured on the
monotonic clock; the wall clock only stamps events. The engine runs on the fake
processes and clocks of tests/fakeprocs.py, printer.py played step by step, and
the test moves the wall clock alone. Before the fix the +3 h
step stopped both printing runs (`stall: no metrics record for 180.0 min`)
and the -2 h step left a run that ignores SIGTERM unkilled for two hours.
"""

from __future__ import annotations

from fakeprocs import FakeClock, FakeProcesses, tick_until
from enginekit import printer_cmd, write_plan
from tui.campaign import load_plan
from tui.engine import Engine, read_ledger
from tui.engine.clock import MonotonicAnchors, StepDetector

HOUR = 3600.0


def test_a_step_is_the_wall_clock_moving_more_than_the_monotonic_one():
    steps = StepDetector(tolerance_s=30)
    assert steps.observe(1000.0, 5.0) is None  # the first sight: nothing to compare
    assert steps.observe(1001.0, 6.0) is None
    assert steps.observe(1020.0, 7.0) is None  # 18 s of drift: a slow tick, not a step
    step = steps.observe(1021.0 + 3 * HOUR, 8.0)
    assert step is not None and step.by_s == 3 * HOUR
    assert steps.observe(1022.0 + HOUR, 9.0).by_s == -2 * HOUR


def test_an_anchor_measures_on_the_monotonic_clock_after_first_sight():
    wall, mono = [10_000.0], [50.0]
    anchors = MonotonicAnchors(lambda: wall[0], lambda: mono[0])
    assert anchors.elapsed("stop", 9_990.0) == 10.0  # dated from its wall age, once
    wall[0] += 3 * HOUR  # a step: ignored from now on
    mono[0] += 1.0
    assert anchors.elapsed("stop", 9_990.0) == 11.0
    assert anchors.elapsed("future", wall[0] + 60) == 0.0  # a wall time ahead is "now"


def _plan(tmp_path):
    variants = f"""
    [[variant]]
    id = "a"
    category = "mandatory"
    command = {printer_cmd("--steps", "400", "--sleep", "0.02")}
    minutes = 1

    [[variant]]
    id = "b"
    category = "useful"
    command = {printer_cmd("--steps", "400", "--sleep", "0.02")}
    minutes = 1

    [[variant]]
    id = "c"
    category = "useful"
    command = {printer_cmd("--steps", "100000", "--sleep", "0.02", "--nan-at", "150",
                           "--ignore-sigterm")}
    minutes = 1
    """
    stops = """
    [[stop]]
    rule = "stall"
    minutes = 1

    [[stop]]
    rule = "resume"
    within_minutes = 1
    variants = ["a", "b"]

    [[stop]]
    rule = "non_finite"
    """
    return write_plan(tmp_path, variants, stops, gpus=3)


def test_wall_clock_steps_of_plus_3h_and_minus_2h_stop_no_run_and_are_logged(tmp_path):
    """On the engine's fake processes and clocks (tests/fakeprocs.py): the wall clock
    jumps while the monotonic one goes on, as NTP or a restored VM make it."""
    clock = FakeClock()
    procs = FakeProcesses(clock)
    engine = Engine(load_plan(_plan(tmp_path)), clock=clock.wall, monotonic=clock.mono,
                    poll_interval=0.05, processes=procs).open()
    stepped = []

    def step_the_wall_clock():
        printing = {r: v.records for r, v in engine.watcher.views().items()}
        if not stepped and len(printing) == 3 and min(printing.values()) >= 5:
            clock.step_wall(3 * HOUR)  # NTP steps the clock forward while all three print
            stepped.append(3)
        c = next((r for r in engine.state.runs if r.target == "c"), None)
        if stepped == [3] and c is not None and c.stop_requested is not None:
            clock.step_wall(-2 * HOUR)  # and back by 2 h while c's grace runs (no SIGTERM)
            stepped.append(-2)
        return engine.finished

    try:
        tick_until(engine, procs, clock, step_the_wall_clock, "the campaign's end")
    finally:
        engine.close()
    runs = {r.target: r for r in engine.state.runs}
    assert runs["a"].state == "completed" and runs["a"].stop is None
    assert runs["b"].state == "completed" and runs["b"].stop is None
    assert runs["c"].state == "stopped" and runs["c"].stop.rule == "non_finite"
    ledger = read_ledger(tmp_path / ".itera" / "ledger.jsonl")
    fired = [e for e in ledger if e["event"] == "stop_rule_fired"]
    assert [e["rule"] for e in fired] == ["non_finite"], fired
    steps = [round(e["by_s"] / HOUR) for e in ledger if e["event"] == "clock_stepped"]
    assert steps == [3, -2]
    killed = [e for e in ledger if e["event"] == "run_killed"]
    assert len(killed) == 1 and killed[0]["after_s"] < 0.5 * HOUR  # the 1 s grace, not 2 h
