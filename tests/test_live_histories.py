"""A run's live histories take a batch at a time and keep what one pair at a time kept.

`RunLive._ingest` collects a batch's loss and metric points and its step changes in
lists and hands them over once (a tqdm bar is a record per update: a Python call per
record was a tenth of the ingest); `Downsampled.extend` and `StepTimes.extend` must
keep exactly the points one pair at a time kept (`OneByOne`, the rule as it was first
written), through every halving."""

from __future__ import annotations

from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from tui.engine.watching.live import Downsampled, StepTimes


class OneByOne:
    """The history's rule one pair at a time, as it was written before batches: the pair
    kept when the count of pairs seen is a multiple of the stride; one point too many,
    and every other point goes and the stride doubles."""

    def __init__(self, max_points: int):
        self.max_points, self.points, self.stride, self._seen = max_points, [], 1, 0

    def add(self, x, y) -> None:
        if self._seen % self.stride == 0:
            self.points.append((x, float(y)))
            if len(self.points) > self.max_points:
                self.points = self.points[::2]
                self.stride *= 2
        self._seen += 1

values = st.one_of(st.integers(-5, 5), st.floats(allow_nan=False, width=32))
batches = st.lists(st.lists(st.tuples(st.integers(0, 10_000), values), max_size=40), max_size=12)


@settings(max_examples=300, deadline=None)
@given(batches=batches, max_points=st.integers(1, 9), primed=st.integers(0, 30))
def test_a_history_extended_by_batches_is_the_history_added_point_by_point(
        batches, max_points, primed):
    one, many = OneByOne(max_points), Downsampled(max_points)
    for i in range(primed):  # a history already thinned before these batches
        one.add(i, i)
    many.extend([(i, i) for i in range(primed)])
    for batch in batches:
        for x, y in batch:
            one.add(x, y)
        many.extend(batch)
        assert (many.points, many.stride, many._seen) == (one.points, one.stride, one._seen)
        assert all(type(y) is float for _, y in many.points)


def test_the_fill_that_halves_the_history_comes_at_the_same_point():
    one, many = OneByOne(4), Downsampled(4)
    batch = [(x, float(x)) for x in range(23)]
    for x, y in batch:
        one.add(x, y)
    many.extend(batch)
    assert one.stride == 8 and many.points == one.points == [(0, 0.0), (8, 8.0), (16, 16.0)]


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.lists(st.integers(0, 6), max_size=20), max_size=8),
       maxlen=st.integers(1, 8))
def test_step_changes_extended_by_batches_are_those_added_one_by_one(steps, maxlen):
    one, many = deque(maxlen=maxlen), StepTimes(maxlen)
    t = 0.0
    for batch in steps:
        changes, last = [], many.last
        for step in batch:
            t += 1.0
            if not one or one[-1][1] != step:  # one at a time: a step other than the last
                one.append((t, step))
            if step != last:  # what the ingest loop collects
                changes.append((t, step))
                last = step
        many.extend(changes)
        assert list(many._points) == list(one)


def test_a_printed_batch_is_dated_once_and_keeps_the_steps_before_it(tmp_path):
    """A printed batch carries no time of its own: every record of it is dated by when it
    was written (the stream's mtime), so only its newest step is a change worth keeping.
    A tqdm bar read after a while is thousands of steps at that one time: dated record by
    record they pushed the whole history out of the bounded `StepTimes`, and a checkpoint
    written before them could no longer be dated by its mtime."""
    import os

    from tui.campaign.plan import MetricPattern, StopRule
    from tui.campaign.presets import build_spec
    from tui.engine.rules import RuleSet
    from tui.engine.watching.live import MAX_POINTS, RunLive

    spec = build_spec(None, (MetricPattern("step", r"step (\d+)"), MetricPattern("loss", r"loss (\S+)")))
    rules = RuleSet((StopRule("non_finite", metrics=("loss",)),), "v", "run")
    log = tmp_path / "stdout.log"
    live = RunLive("v", tmp_path, rules, spec, "acc", "max", 0.0)
    written = 0
    for upto, when in ((100, 1000.0), (100 + 2 * MAX_POINTS, 2000.0)):
        with log.open("a") as out:
            out.writelines(f"step {s} loss 0.5\n" for s in range(written + 1, upto + 1))
        written = upto
        os.utime(log, (when, when))
        assert live.poll(when + 0.5) is None
    assert live.global_step == 100 + 2 * MAX_POINTS
    assert [live.step_times.at(t) for t in (999.0, 1500.0, 2000.0)] == [None, 100, written]
