"""After the start the frozen plan is the only plan: an edited campaign.toml is named, never used.

A finished campaign answers "no" (the wide variant gains 0.10 where 0.20 is
asked). Someone then edits `min_gain` to 0.0 in campaign.toml, which would
turn the answer into "yes". `status` (text and JSON), a headless restart and
a rebuilt report must all still say "answered no", and each must name the
edited key; a running engine notices the edit too (one warning in the ledger).
"""

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))

from bundlekit import DELIVERED_VARIANTS, write_campaign  # noqa: E402
from clikit import cli
from conftest import run_cli  # noqa: E402
from tui.campaign.frozen import edited_keys, load_started_plan  # noqa: E402


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    path = write_campaign(tmp_path_factory.mktemp("frozen"), DELIVERED_VARIANTS)
    path.write_text(path.read_text().replace("min_gain = 0.01", "min_gain = 0.2"))
    done = run_cli("run", "--headless", str(path), timeout=300)
    assert "answered no" in done.stdout, done.stdout + done.stderr
    path.write_text(path.read_text().replace("min_gain = 0.2", "min_gain = 0.0"))
    return path


@pytest.mark.slow
def test_status_still_says_no_and_names_the_edit(finished):
    done = cli("status", str(finished))
    assert "verdict: answered no" in done.stdout, done.stdout
    assert "campaign.min_gain" in done.stdout and "itera-tui new" in done.stdout
    data = json.loads(cli("status", str(finished), "--json").stdout)
    assert data["verdict"]["verdict"] == "no"
    assert data["conclusion"]["winners"] == [] and "< 0.2" in data["conclusion"]["text"]
    assert data["plan_edited"] == ["campaign.min_gain"]


@pytest.mark.slow
def test_a_headless_restart_and_a_rebuilt_report_still_say_no_and_name_it(finished):
    done = run_cli("run", "--headless", str(finished), timeout=300)
    out = done.stdout
    assert "answered yes" not in out and "answered no" in out, out + done.stderr
    assert "campaign.min_gain" in out
    done = run_cli("wrapup", str(finished), timeout=300)
    report = (finished.parent / "outputs" / "bundle" / "report.md").read_text()
    assert "answered no" in report and "answered yes" not in report
    assert "campaign.min_gain" in report
    ledger = (finished.parent / ".itera" / "ledger.jsonl").read_text().splitlines()
    notes = [json.loads(line) for line in ledger if "campaign.min_gain" in line]
    assert len([n for n in notes if n.get("event") == "warning"]) == 1  # one warning


def test_the_edited_keys_name_tables_and_arrays_by_id():
    frozen = {"campaign": {"min_gain": 0.2, "name": "x"},
              "variant": [{"id": "a", "hours": 1}, {"id": "b", "hours": 2}],
              "calibration": {"k": 1}}
    edited = {"campaign": {"min_gain": 0.0, "name": "x", "threshold": 0.5},
              "variant": [{"id": "a", "hours": 1}, {"id": "b", "hours": 3}]}
    assert edited_keys(frozen, edited) == ("campaign.min_gain", "campaign.threshold",
                                           "variant[b].hours")
    assert edited_keys(frozen, {k: v for k, v in frozen.items()}) == ()


@pytest.mark.slow
def test_a_running_engine_notices_an_edit_once(tmp_path, monkeypatch):
    from tui.engine import engine as engine_module
    from tui.engine import Engine

    monkeypatch.setattr(engine_module, "PLAN_CHECK_S", 0.0)
    path = write_campaign(tmp_path, DELIVERED_VARIANTS)
    engine = Engine(load_started_plan(path), poll_interval=0.05).open()
    try:
        engine.tick()
        path.write_text(path.read_text().replace("min_gain = 0.01", "min_gain = 0.5"))
        deadline = time.monotonic() + 120
        while not engine.finished:  # to the end: the runs it started end with it
            assert time.monotonic() < deadline, "the campaign did not finish in time"
            engine.tick()
            time.sleep(0.05)
        warned = [w for w in engine.state.warnings if "campaign.min_gain" in w.message]
        assert len(warned) == 1 and "itera-tui new" in warned[0].message
        assert engine.plan.campaign.min_gain == 0.01  # the frozen plan is kept
    finally:
        engine.close()
