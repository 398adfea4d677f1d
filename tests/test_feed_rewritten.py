"""A metrics file truncated or replaced is read again from its start: its NaN is stopped.

Before: the live tail read on from its old offset, so a file started over with
"w" (shorter than what was read) was never read again, and one renamed over
it (longer) was read from the middle: the NaN near its start was missed and
the run trained on.
"""

from __future__ import annotations

import os

import pytest

from enginekit import script_cmd, wait_for, write_plan
from test_app_support import kill_runs
from tui.campaign import load_plan
from tui.engine import Engine, read_ledger
from tui.engine.reading.segments import SegmentTail


def test_a_tail_reads_a_truncated_or_replaced_file_from_its_start(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text("a" * 300 + "\n" + "b\n")
    tail = SegmentTail(path, printed=False)
    assert tail.read() == ["a" * 300, "b"]
    path.write_text("c\n")  # truncated: shorter than what was read
    assert tail.read() == ["c"] and tail.rewound == 1
    path.write_text("d" * 300 + "\n" + "e" * 10 + "\n")  # in place, longer, another head
    assert tail.read() == ["d" * 300, "e" * 10] and tail.rewound == 2
    new = tmp_path / "new"
    new.write_text("f" * 400 + "\n")
    os.replace(new, path)  # another inode
    assert tail.read() == ["f" * 400] and tail.rewound == 3
    with open(path, "a") as f:
        f.write("g\n")  # appending is not starting over
    assert tail.read() == ["g"] and tail.rewound == 3


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["truncate", "replace"])
def test_a_nan_written_after_the_metrics_file_starts_over_is_stopped(tmp_path, mode):
    variants = f"""
    [[variant]]
    id = "v"
    category = "mandatory"
    command = {script_cmd("rewriter.py", mode)}
    minutes = 1
    """
    path = write_plan(tmp_path, variants, '[[stop]]\nrule = "non_finite"\nmetrics = ["loss"]\n')
    engine = Engine(load_plan(path), poll_interval=0.05).open()
    try:
        def tick_until(predicate):
            engine.tick()
            return predicate()

        def run():
            return next((r for r in engine.state.runs if r.kind == "run"), None)

        def read_40():
            view = engine.watcher.view(run().id) if run() is not None else None
            return view is not None and view.last_step == 40

        wait_for(lambda: tick_until(read_40), timeout=60, what="the first 40 records read")
        rid = run().id
        (tmp_path / ".itera" / "runs" / rid / "go").write_text("")
        wait_for(lambda: tick_until(lambda: run().stop is not None), timeout=30,
                 what="the NaN after the rewrite stopped")
        assert run().stop.rule == "non_finite" and run().stop.step == 2
        warnings = [e["message"] for e in read_ledger(tmp_path / ".itera" / "ledger.jsonl")
                    if e["event"] == "warning"]
        assert f"{rid}: metrics.jsonl was truncated or replaced: read again from its start" \
            in warnings
    finally:
        kill_runs(engine)
        engine.close()
