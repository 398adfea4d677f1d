"""The command line beside a driven campaign (README, "Commands"): `status` is
read-only and safe while a run is driven; `new` is refused while the campaign is
driven and moves nothing. The driver is a real engine holding the engine lock,
with a real run; the commands are real `python -m tui.cli` processes."""

import json

import psutil
import pytest

from conftest import run_cli
from enginekit import printer_cmd, wait_for, write_plan
from test_app_support import kill_runs
from tui.campaign import load_plan
from tui.engine import Engine

pytestmark = pytest.mark.slow  # a real run process and CLI subprocesses

VARIANT = f"""
[[variant]]
id = "control"
category = "mandatory"
command = {printer_cmd("--steps", "100000", "--sleep", "0.05")}
minutes = 5
"""


@pytest.fixture
def driven(tmp_path):
    path = write_plan(tmp_path, VARIANT)
    engine = Engine(load_plan(path), poll_interval=0.05).open()
    try:
        wait_for(lambda: engine.tick() or engine.state.running, what="a running run")
        yield path, engine
    finally:
        engine.close()
        kill_runs(engine)


def test_status_while_driven_reads_the_ledger_and_changes_nothing(driven):
    path, engine = driven
    ledger = path.parent / ".itera" / "ledger.jsonl"
    before = ledger.read_bytes()
    shown = run_cli("status", "--json", str(path), cwd=path.parent)
    assert shown.returncode == 0, shown.stderr
    (run,) = json.loads(shown.stdout)["runs"]
    assert run["state"] == "running" and run["id"] == engine.state.running[0].id
    assert ledger.read_bytes() == before  # read-only: not a byte written
    # the engine still drives: it records and its run lives on
    engine.set_paused(True)
    assert engine.state.paused and psutil.pid_exists(engine.state.running[0].pid)


def test_new_is_refused_while_the_campaign_is_driven_and_moves_nothing(driven):
    path, engine = driven
    refused = run_cli("new", "--yes", str(path), cwd=path.parent)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "is driving this campaign" in refused.stderr and "Traceback" not in refused.stderr
    assert (path.parent / ".itera" / "ledger.jsonl").is_file()
    assert not (path.parent / "archive").exists()
    assert engine.state.running  # the run was not touched
