"""A run that writes faster than the engine reads: bounded reads, a counted backlog, and
the rules on the newest records.

Before: the engine read everything a run wrote, in order, so a flood left it
minutes behind (a NaN printed at the end stopped the run long after) and its
memory grew with the output rate (2 GB after a 10 s flood of printed lines).
Now a live tail more than one read chunk behind jumps to the newest 64 KiB and
counts the bytes it skipped; the backlog a restart finds is still read whole.
The flood test runs the hostile script as a real process beside the engine;
the memory figure (60 s flood, peak RSS) is `bench/flood_bench.py`'s.
"""

from __future__ import annotations

import json
import time

import pytest

from enginekit import script_cmd, write_plan
from tui.campaign import load_plan
from tui.engine import Engine, read_ledger
from tui.engine.reading.segments import SHED_TAIL, SegmentTail


def _lines(first: int, count: int) -> bytes:
    return b"".join(json.dumps({"step": i, "loss": 0.5}).encode() + b"\n"
                    for i in range(first, first + count))


def test_a_backlog_past_the_bound_is_skipped_to_the_newest_lines_and_counted(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(_lines(0, 10))
    tail = SegmentTail(path, printed=False, chunk=4096, shed_after=4096)
    assert len([x for x in tail.read() if x]) == 10  # the first read: all of it, whatever
    with open(path, "ab") as f:
        f.write(_lines(10, 20_000))  # far more than one chunk behind
    lines = [json.loads(x) for x in tail.read() if x]
    assert tail.skipped > 0 and tail.skipped + SHED_TAIL >= path.stat().st_size - 1000
    assert lines and lines[-1]["step"] == 20_009  # the newest record is read at once
    assert all(isinstance(r, dict) for r in lines)  # the line cut by the jump was dropped
    assert tail.backlog == 0


def test_the_backlog_found_at_the_first_read_is_read_whole_before_any_skip(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(_lines(0, 5_000))  # written while no engine watched
    tail = SegmentTail(path, printed=False, chunk=4096, shed_after=4096)
    steps = []
    while True:
        steps += [json.loads(x)["step"] for x in tail.read() if x]
        assert tail.backlog <= path.stat().st_size
        if not tail.more:
            break
    assert steps == list(range(5_000)) and tail.skipped == 0


@pytest.mark.slow
def test_a_flooding_run_is_stopped_by_the_nan_it_prints_last(tmp_path):
    variants = f"""
    [[variant]]
    id = "flood"
    category = "mandatory"
    command = {script_cmd("hostile.py", "flood", "--seconds", "4")}
    minutes = 1
    """
    path = write_plan(tmp_path, variants, '[[stop]]\nrule = "non_finite"\n')
    engine = Engine(load_plan(path), poll_interval=0.1).open()
    deadline = time.monotonic() + 120
    behind = []
    try:
        while not engine.finished:
            assert time.monotonic() < deadline, "the flood was not stopped in time"
            engine.tick()
            behind += [v.backlog_bytes for v in engine.watcher.views().values()]
            time.sleep(0.1)
    finally:
        engine.close()
    run = next(r for r in engine.state.runs if r.target == "flood")
    assert run.stop is not None and run.stop.rule == "non_finite", run
    ledger = read_ledger(tmp_path / ".itera" / "ledger.jsonl")
    said = [e for e in ledger if e["event"] == "warning" and e.get("skipped_bytes")]
    assert said and "writes faster than the engine reads" in said[0]["message"]
    assert max(behind) < 64 << 20  # never more than a few polls of output behind
