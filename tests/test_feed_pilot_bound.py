import pytest
"""The pilot bound counts the global step, not a printed step that restarts each epoch.

A script printing pytorch/examples' epoch-local batch numbers and ignoring
ITERA_MAX_STEPS never prints a step above its epoch length (100 here); its
pilot of 250 steps is still stopped at the bound, because the engine's
watcher reads the live view's monotonic `global_step`.
"""

import sys
import time

from conftest import REPO
from tui.campaign import load_plan
from tui.engine import Engine

SCRIPT = REPO / "tests" / "scripts" / "epoch_printer.py"


@pytest.mark.slow
def test_a_pilot_whose_printed_step_restarts_each_epoch_stops_at_its_global_bound(tmp_path):
    (tmp_path / "campaign.toml").write_text(f"""
[campaign]
name = "t"
question = "q"
metric = "val_loss"
direction = "min"

[[lot]]
gpu = "cpu"
hours = 1
price_usd = 1.0

[[variant]]
id = "control"
category = "mandatory"
command = ["{sys.executable}", "{SCRIPT}"]
minutes = 2

[pilot]
steps = 250
decide = "ask"

[metrics]
preset = "pytorch_examples"

[engine]
grace_seconds = 1.0
""")
    engine = Engine(load_plan(tmp_path / "campaign.toml"), poll_interval=0.05).open()
    try:
        deadline = time.time() + 60
        while engine.snapshot().phase != "decision":
            assert time.time() < deadline, "the pilot was not bounded"
            engine.tick()
            time.sleep(0.05)
        (pilot,) = [r for r in engine.state.runs if r.kind == "pilot"]
        view = engine.snapshot().live[pilot.id]
    finally:
        engine.close()
    assert pilot.stop is not None and pilot.stop.rule == "pilot_bound", pilot
    assert "of 250" in pilot.stop.reason
    assert view.last_step <= 100 and view.global_step >= 250  # printed vs global
