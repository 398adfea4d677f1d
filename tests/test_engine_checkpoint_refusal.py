"""`c` on a run that can never answer a checkpoint request is refused, with why.

A print-only script (no itera SDK, no callback) never reads the control file:
a request to it would sit there unanswered. The engine refuses it once the run
has shown it only prints (records from its output, none through the SDK);
the room and the CLI show the refusal as the engine words it.
"""

import pytest

from enginekit import printer_cmd, write_plan
from fakeprocs import FakeClock, FakeProcesses, tick_until
from tui.campaign import load_plan
from tui.engine import Engine
from tui.engine.errors import EngineError

def test_a_checkpoint_request_to_a_print_only_run_is_refused_with_why(tmp_path):
    path = write_plan(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {printer_cmd("--steps", "2000", "--sleep", "0.02")}
        minutes = 5
    """, extra='\n[checkpoint]\nwatch = ["ckpt/*.pt"]\n')
    clock = FakeClock()  # the engine's fake processes and clocks (tests/fakeprocs.py)
    procs = FakeProcesses(clock)
    engine = Engine(load_plan(path), poll_interval=0.05, clock=clock.wall,
                    monotonic=clock.mono, processes=procs).open()
    try:
        tick_until(engine, procs, clock, lambda: engine.state.running and engine.live_view(
            engine.state.running[0].id).records >= 3, "the printer printed")
        rid = engine.state.running[0].id
        with pytest.raises(EngineError) as refused:
            engine.request_checkpoint(rid)
        assert str(refused.value) == (
            f"{rid} cannot checkpoint on request: it only prints (no itera SDK or "
            "framework-callback records in metrics.jsonl, no checkpoint acknowledged), so it "
            "never reads a request (the checkpoints it writes by itself are still watched: "
            "[checkpoint] watch). Use tui.training (run.checkpoint_requested / "
            "save_checkpoint) or the HF or Lightning callback.")
        assert not engine.state.run(rid).checkpoints
        events = [e["event"] for e in engine.journal.events] if hasattr(
            engine.journal, "events") else []
        assert "checkpoint_requested" not in events
        engine.stop_run(rid, "enough")
        tick_until(engine, procs, clock, lambda: not engine.state.running, "the run stopped")
    finally:
        engine.close()
