"""A run that swaps its own files for FIFOs and /dev/zero harms only itself.

Before: opening a FIFO `metrics.jsonl` blocked the engine for ever (every
other run lost its rules) and `status` too; a `stdout.log` linked to
/dev/zero was read without end. Now every file a run controls is opened
with O_NONBLOCK and read only if `fstat` says it is a regular file; the rest
is named once in the ledger and ignored. The hostile run and an honest one
that prints a NaN are real processes side by side: the NaN still stops the
honest one, a stop request to the hostile one (its control file a FIFO) still
ends it, and `status` answers while the FIFOs are in place.
"""

from __future__ import annotations

import pytest

import time

from clikit import cli
from enginekit import printer_cmd, script_cmd, write_plan
from tui.campaign import load_plan
from tui.engine import Engine, read_ledger
from tui.engine.reading.regular_files import NotRegular, open_regular, read_regular


def test_open_regular_names_what_is_not_a_regular_file(tmp_path):
    import os

    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    for name, kind in (("fifo", "a FIFO"), ("dir", "a directory")):
        try:
            open_regular(tmp_path / name)
        except NotRegular as refused:
            assert refused.kind == kind and f"{name} is {kind}" in str(refused)
        else:
            raise AssertionError(f"{name} was opened")
    try:
        read_regular("/dev/zero")
    except NotRegular as refused:
        assert refused.kind == "a character device"
    else:
        raise AssertionError("/dev/zero was read")
    (tmp_path / "f").write_bytes(b"abc")
    assert read_regular(tmp_path / "f", offset=1) == b"bc"


@pytest.mark.slow
def test_a_run_swapping_its_files_for_fifos_and_dev_zero_harms_only_itself(tmp_path):
    variants = f"""
    [[variant]]
    id = "hostile"
    category = "mandatory"
    command = {script_cmd("hostile.py", "swap-files", "--seconds", "600")}
    minutes = 1

    [[variant]]
    id = "honest"
    category = "useful"
    command = {printer_cmd("--steps", "100000", "--sleep", "0.02", "--nan-at", "200")}
    minutes = 1
    """
    path = write_plan(tmp_path, variants, '[[stop]]\nrule = "non_finite"\n', gpus=2)
    engine = Engine(load_plan(path), poll_interval=0.05, sample_interval=0.0).open()
    status = None
    deadline = time.monotonic() + 90
    stop_asked = False
    try:
        while not engine.finished:
            assert time.monotonic() < deadline, "campaign did not finish in time"
            engine.tick()
            engine.observe_probe(_Sample())  # writes samples.jsonl: a FIFO for the hostile run
            warnings = [w.message for w in engine.state.warnings]
            hostile = next((r for r in engine.state.running if r.target == "hostile"), None)
            if not stop_asked and hostile and any("metrics.jsonl is a FIFO" in w for w in warnings):
                if status is None:  # `status` while the FIFOs are in place
                    status = cli("status", str(path), cwd=tmp_path)
                engine.stop_run(hostile.id, "the test ends it")  # its control file is a FIFO
                stop_asked = True
            time.sleep(0.05)
    finally:
        engine.close()
    runs = {r.target: r for r in engine.state.runs}
    assert runs["honest"].stop is not None and runs["honest"].stop.rule == "non_finite"
    assert runs["hostile"].state == "stopped"
    hostile_id = runs["hostile"].id
    warnings = [w.message for w in engine.state.warnings]
    for said in ("metrics.jsonl is a FIFO", "stdout.log is a character device",
                 "control file: control.jsonl is a FIFO",
                 "samples.jsonl: samples.jsonl is a FIFO"):
        named = [w for w in warnings if said in w]
        assert len(named) == 1 and named[0].startswith(hostile_id), (said, warnings)
    assert status is not None and status.returncode == 0, status and status.stderr
    assert "hostile" in status.stdout
    ledger = read_ledger(tmp_path / ".itera" / "ledger.jsonl")
    assert any(e["event"] == "run_stop_requested" and e["run"] == hostile_id for e in ledger)


class _Sample:
    """A probe sample as the session hands it (no GPU on this box)."""

    gpu = None
    host = None

    def to_dict(self) -> dict:
        return {"t": time.time()}
