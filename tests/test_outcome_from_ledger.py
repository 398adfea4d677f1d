"""Judging an ended run reads the ledger, not the run's output.

Before: `status`, the room's every step and the report read every record of
every completed run again to find its final metric and any non-finite value,
so after an output flood the end took minutes (`status` 23 s after a 79 MB
printed flood, 49 s after 73 MB of JSONL, here). Now the live engine folds
the records it reads into `run_exited`, and acceptance and the verdict take
them from there: bounded by the ledger's size.
"""

from __future__ import annotations

import pytest

from enginekit import printer_cmd, write_plan
from fakeprocs import drive_plan
from tui.engine import read_ledger
from tui.engine.reading import feeds
from tui.service.status import status_dict

VARIANTS = f"""
[[variant]]
id = "control"
category = "mandatory"
command = {printer_cmd("--steps", "30", "--sleep", "0.01")}
minutes = 1

[[variant]]
id = "wide"
category = "useful"
command = {printer_cmd("--steps", "30", "--sleep", "0.01", "--nan-at", "29")}
minutes = 1
"""


def test_status_judges_ended_runs_from_the_ledger_without_reading_their_output(
        tmp_path, monkeypatch):
    path = write_plan(tmp_path, VARIANTS, gpus=2)
    drive_plan(path)  # on the fake processes (tests/fakeprocs.py): no process started
    exited = {e["run"].split("-")[0]: e for e in read_ledger(tmp_path / ".itera/ledger.jsonl")
              if e["event"] == "run_exited"}
    assert exited["control"]["read_whole"] is True
    assert exited["control"]["final_metric"] == 1.0  # acc at the last of 30 steps
    assert exited["wide"]["non_finite"].startswith("non-finite numbers: loss was nan")

    def no_reading(*args, **kwargs):
        raise AssertionError("an ended run's output was read again")

    monkeypatch.setattr(feeds, "recorded_sources", no_reading)
    data = status_dict(path)
    assert [c.split(":")[0] for c in data["budget"]["accepted_configs"]] == ["control"]
    assert data["conclusion"]["values"] == {"control": 1.0}
    assert "non-finite numbers: loss was nan" in str(data["budget"])
