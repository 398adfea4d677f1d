"""The live engine folds a run's readout in the loop that feeds its view (issue 42).

`RunLive._ingest` walks every batch for the view; round 4's `ReadoutFold.add` walked
each batch a second time for the readout `run_exited` carries. The fold now happens
in `_ingest`'s own loop: a batch is walked once by the rules and once by the view, and
what it folds is exactly what `ReadoutFold.add` (the after-the-fact reading of
`read_run`) folds from the same records.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tui.campaign.plan import StopRule
from tui.engine.conclusion.delivered import BEST_MODEL_EVENT
from tui.engine.conclusion.outcome import ReadoutFold
from tui.engine.rules import RuleSet
from tui.engine.watching.live import RunLive

METRIC, WATCHED = "val_acc", ("loss",)


class Walked(list):
    """A batch that counts how often it is walked."""

    walks = 0

    def __iter__(self):
        self.walks += 1
        return super().__iter__()


def live(tmp_path, rules=(), bound=None) -> RunLive:
    return RunLive("v", tmp_path, RuleSet(tuple(rules), "v", "run"), (), METRIC, "max", 0.0,
                   bound=bound, watched=WATCHED)


def test_a_batch_is_walked_once_by_the_rules_and_once_by_the_view_and_its_fold(tmp_path):
    run = live(tmp_path, (StopRule("non_finite", metrics=("loss",)),))
    batch = Walked([{"step": s, "loss": 1.0 / (s + 1), METRIC: 0.5 + s / 100} for s in range(50)])
    run.feeds.poll = lambda: iter([(0, batch)])
    assert run.poll(1.0) is None
    assert batch.walks == 2  # first_stop, then _ingest: the readout folded in the latter
    assert run.fold.to_fields()["final_metric"] == 0.99 and run.final == 0.99


numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32),
                    st.integers(-1000, 1000))
steps = st.integers(0, 40)
metric_records = st.fixed_dictionaries({}, optional={"step": steps, "global_step": steps,
                                                      "loss": numbers, METRIC: numbers})
event_records = st.one_of(
    st.fixed_dictionaries({"event": st.just("checkpoint")},
                          optional={"step": steps, METRIC: numbers, "path": st.just("a.pt")}),
    st.fixed_dictionaries({"event": st.just(BEST_MODEL_EVENT), "path": st.just("out/ck-5"),
                           "metric": st.just(METRIC), "best_step": steps, "value": numbers}))
batches = st.lists(st.tuples(st.sampled_from([0, 1]),
                             st.lists(st.one_of(metric_records, event_records), min_size=1,
                                      max_size=12)), max_size=6)


def same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a)
                      and math.isnan(b))


@settings(max_examples=150, deadline=None)
@given(batches=batches, bound=st.one_of(st.none(), steps))
def test_the_live_fold_is_the_fold_of_read_run(tmp_path_factory, batches, bound):
    run = live(tmp_path_factory.mktemp("run"), bound=bound)
    after = ReadoutFold(METRIC, WATCHED, bound)
    for kind, records in batches:
        run._ingest([dict(r) for r in records], 1.0, False, kind)
        after.add(kind, [dict(r) for r in records])
    got, want = run.fold.to_fields(), after.to_fields()
    assert got.keys() == want.keys() and all(same(got[k], want[k]) for k in want), (got, want)
    assert run.fold.values(0) == after.values(0) or all(
        same(x, y) for x, y in zip(run.fold.values(0), after.values(0)))
    assert run.fold.at == after.at
