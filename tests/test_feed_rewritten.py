"""A metrics file truncated or replaced is read again from its start: its NaN is stopped.

Before: the live tail read on from its old offset, so a file started over with
"w" (shorter than what was read) was never read again, and one renamed over
it (longer) was read from the middle: the NaN near its start was missed and
the run trained on.
"""

from __future__ import annotations

import json
import os

import pytest

from enginekit import script_cmd, write_plan
from fakeprocs import FakeClock, FakeProcesses, tick_until
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


@pytest.mark.parametrize("mode", ["truncate", "replace"])
def test_a_nan_written_after_the_metrics_file_starts_over_is_stopped(tmp_path, mode):
    """The run is a fake (tests/fakeprocs.py) whose records the test writes as
    tests/scripts/rewriter.py would: 40 records, then the file started over with "w"
    (the same inode, shorter) or a new, longer one renamed over it, a NaN in its
    second record. The engine's feed is the subject, not a process."""
    variants = f"""
    [[variant]]
    id = "v"
    category = "mandatory"
    command = {script_cmd("rewriter.py", mode)}
    minutes = 1
    """
    path = write_plan(tmp_path, variants, '[[stop]]\nrule = "non_finite"\nmetrics = ["loss"]\n')
    clock = FakeClock()
    procs = FakeProcesses(clock)
    engine = Engine(load_plan(path), clock=clock.wall, monotonic=clock.mono,
                    poll_interval=0.05, processes=procs).open()
    try:
        def run():
            return next((r for r in engine.state.runs if r.kind == "run"), None)

        def read_40():
            view = engine.watcher.view(run().id) if run() is not None else None
            return view is not None and view.last_step == 40

        rid = tick_until(engine, procs, clock, lambda: run() and run().id, "the run's launch")
        fake = procs.run(rid)
        for step in range(1, 41):
            fake.record(step=step, loss=1.0 / step, acc=0.5)
        tick_until(engine, procs, clock, read_40, "the first 40 records read")

        def record(step, loss):
            return json.dumps({"t": clock.wall(), "step": step, "loss": loss,
                               "acc": 0.5}) + "\n"

        metrics = fake.env["ITERA_METRICS"]
        again = [record(1, 1.0), record(2, float("nan"))]
        if mode == "truncate":
            with open(metrics, "w") as f:
                f.writelines(again)
        else:
            with open(metrics + ".new", "w") as f:
                f.writelines(again + [record(step, 0.5) for step in range(3, 200)])
            os.replace(metrics + ".new", metrics)
        tick_until(engine, procs, clock, lambda: run().stop is not None,
                   "the NaN after the rewrite stopped")
        assert run().stop.rule == "non_finite" and run().stop.step == 2
        warnings = [e["message"] for e in read_ledger(tmp_path / ".itera" / "ledger.jsonl")
                    if e["event"] == "warning"]
        assert f"{rid}: metrics.jsonl was truncated or replaced: read again from its start" \
            in warnings
    finally:
        engine.close()
