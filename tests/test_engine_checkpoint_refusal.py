"""`c` on a run that can never answer a checkpoint request is refused, with why.

A print-only script (no itera SDK, no callback) never reads the control file:
a request to it would sit there unanswered. The engine refuses it once the run
has shown it only prints (records from its output, none through the SDK);
the room and the CLI show the refusal as the engine words it.
"""

import time

import pytest

from enginekit import printer_cmd, write_plan
from tui.campaign import load_plan
from tui.engine import Engine
from tui.engine.errors import EngineError

pytestmark = pytest.mark.slow


def test_a_checkpoint_request_to_a_print_only_run_is_refused_with_why(tmp_path):
    path = write_plan(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {printer_cmd("--steps", "2000", "--sleep", "0.02")}
        minutes = 5
    """, extra='\n[checkpoint]\nwatch = ["ckpt/*.pt"]\n')
    engine = Engine(load_plan(path), poll_interval=0.05).open()
    try:
        deadline = time.monotonic() + 60
        while not (engine.state.running and engine.live_view(
                engine.state.running[0].id).records >= 3):
            assert time.monotonic() < deadline, "the printer never printed"
            engine.tick()
            time.sleep(0.05)
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
        while engine.state.running:
            assert time.monotonic() < deadline + 30, "the run did not stop"
            engine.tick()
            time.sleep(0.05)
    finally:
        engine.close()
