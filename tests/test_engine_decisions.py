"""Pilot, decision point, drops and GPU lanes: the campaigns on the engine's fake
processes and clocks (tests/fakeprocs.py), the command line's words through real
`itera-tui` processes (marked slow)."""

import pytest

from enginekit import printer_cmd, write_plan
from fakeprocs import FakeClock, FakeProcesses, drive_plan, tick_until
from tui.campaign import load_plan
from tui.engine import Engine, EngineError, read_ledger
from tui.engine.decision.answer import WRAPUP, Decision

PILOT = """
[pilot]
steps = 3
decide = "ask"
"""


def three_variants(steps="20", sleep="0.02"):
    return "".join(f"""
    [[variant]]
    id = "{vid}"
    category = "{cat}"
    command = {printer_cmd("--steps", steps, "--sleep", sleep)}
    minutes = 1
    """ for vid, cat in (("control", "mandatory"), ("b", "useful"), ("c", "exploratory")))


def test_queue_waits_at_the_decision_point_until_decided(tmp_path):
    path = write_plan(tmp_path, three_variants(), pilot=PILOT)
    clock = FakeClock()
    procs = FakeProcesses(clock)
    engine = Engine(load_plan(path), poll_interval=0.05, clock=clock.wall,
                    monotonic=clock.mono, processes=procs).open()
    try:
        tick_until(engine, procs, clock, lambda: engine.snapshot().phase == "decision",
                   "the decision point")
        for _ in range(5):
            engine.tick()
        assert not [r for r in engine.state.runs if r.kind == "run"]  # nothing launched
        assert engine.state.decision_pending is not None
        with pytest.raises(EngineError, match="mandatory"):
            engine.decide(Decision.drop("control"))
        engine.decide(Decision.drop("c"))
    finally:
        engine.close()
    engine, _ = drive_plan(path)
    full = {r.target: r.state for r in engine.state.runs if r.kind == "run"}
    assert full == {"control": "completed", "b": "completed"}
    assert engine.state.dropped == {"c"}
    assert engine.state.decisions[0].decision == "drop"


def test_decide_wrapup_skips_the_full_runs(tmp_path):
    path = write_plan(tmp_path, three_variants(), pilot=PILOT)
    engine, _ = drive_plan(path, decide=WRAPUP)
    assert not [r for r in engine.state.runs if r.kind == "run"]
    assert engine.state.decisions[0].decision == "wrapup"


def test_dropping_a_mandatory_variant_from_the_cli_is_refused(tmp_path):
    from clikit import cli

    path = write_plan(tmp_path, three_variants(), pilot=PILOT)
    proc = cli("run", "--headless", "--decide", "drop:control", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert "cannot drop 'control': it is mandatory" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_two_gpu_lot_runs_two_at_once_never_two_on_one_gpu(tmp_path):
    path = write_plan(tmp_path, three_variants(steps="40", sleep="0.03"), gpus=2)
    drive_plan(path)
    ledger = read_ledger(tmp_path / ".itera" / "ledger.jsonl")
    running: dict[str, str] = {}  # run -> devices
    max_parallel = 0
    for ev in ledger:
        if ev["event"] == "run_launched":
            assert ev["devices"] not in running.values(), "two runs on one GPU"
            running[ev["run"]] = ev["devices"]
            max_parallel = max(max_parallel, len(running))
        elif ev["event"] == "run_exited":
            running.pop(ev["run"], None)
    assert max_parallel == 2
    devices = {ev["devices"] for ev in ledger if ev["event"] == "run_launched"}
    assert devices == {"0", "1"}


def test_variant_needing_three_gpus_on_two_gpu_lots_is_refused_at_check(tmp_path):
    from clikit import cli

    variants = f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd()}
    minutes = 1
    gpus = 3
    """
    path = write_plan(tmp_path, variants, gpus=2)
    proc = cli("check", str(path))
    assert proc.returncode == 2
    assert "variant[0].gpus: needs 3 GPUs but the largest lot has 2" in proc.stderr


def test_status_lists_full_runs_still_queued_after_the_pilot(tmp_path, monkeypatch):
    import json

    from clikit import cli
    from fakeprocs import fake_host

    fake_host(monkeypatch)  # `itera-tui run --headless` in this process, its runs fakes
    path = write_plan(tmp_path, three_variants(), pilot=PILOT)
    proc = cli("run", "--headless", str(path), cwd=tmp_path)
    assert proc.returncode == 3  # waiting at the decision point
    status = json.loads(cli("status", "--json", str(path), cwd=tmp_path).stdout)
    queued = {r["variant"] for r in status["runs"] if r["state"] == "queued"}
    assert queued == {"control", "b", "c"}
    assert status["phase"] == "decision"
    assert status["decision_pending"] is not None


def test_status_after_a_wrapup_decision_says_the_full_runs_will_not_run(tmp_path):
    import json

    from clikit import cli

    path = write_plan(tmp_path, three_variants(), pilot=PILOT)
    drive_plan(path, decide=WRAPUP)
    status = json.loads(cli("status", "--json", str(path), cwd=tmp_path).stdout)
    full = [r for r in status["runs"] if r["kind"] == "run"]
    assert {r["state"] for r in full} == {"dropped"}
    assert full[0]["note"] == "the decision was to wrap up"
    assert status["conclusion"]["headline"].startswith("inconclusive")


def test_a_deleted_decision_line_is_named_and_never_asked_again(tmp_path):
    """The decision_taken line is deleted after the campaign went on: the decision is
    read from what followed it (the variant it dropped, the full runs it launched),
    status shows it, and the engine names the loss once instead of asking again."""
    import json

    from clikit import cli

    path = write_plan(tmp_path, three_variants(), pilot=PILOT)
    drive_plan(path, decide=Decision.drop("c"))
    ledger = tmp_path / ".itera" / "ledger.jsonl"
    lines = ledger.read_text().splitlines(keepends=True)
    ledger.write_text("".join(line for line in lines
                              if json.loads(line)["event"] != "decision_taken"))
    engine = Engine(load_plan(path), poll_interval=0.05).open()
    try:
        for _ in range(3):
            engine.tick()
        assert engine.state.decision_pending is None
        assert engine.snapshot().phase != "decision"
        decided = engine.state.decided
        assert (decided.decision, decided.drop, decided.by) == ("drop", ("c",), "inferred")
        warned = [w.message for w in engine.state.warnings if "decision_taken" in w.message]
        assert warned == ['ledger: the decision after the pilot is missing (its decision_taken '
                          'line was deleted); what followed shows it was "drop c": kept as '
                          'taken, not asked again']
    finally:
        engine.close()
    engine = Engine(load_plan(path), poll_interval=0.05).open()  # said once, not per open
    engine.close()
    assert len([w for w in engine.state.warnings if "decision_taken" in w.message]) == 1
    out = cli("status", str(path)).stdout
    assert "decision: drop c (by inference: its ledger line was lost" in out and "phase decision" not in out
