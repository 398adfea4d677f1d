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
from tui.engine.reading.feeds import FeedKind
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
batches = st.lists(st.tuples(st.sampled_from([FeedKind.JSONL, FeedKind.PRINTED]),
                             st.lists(st.one_of(metric_records, event_records), min_size=1,
                                      max_size=12)), max_size=6)


def same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a)
                      and math.isnan(b))


@settings(max_examples=150, deadline=None)
@given(batches=batches, bound=st.one_of(st.none(), steps), evaluate=st.booleans())
def test_the_live_fold_is_the_fold_of_read_run(tmp_path_factory, batches, bound, evaluate):
    """With the rules evaluated, a batch the non_finite rule passed whole is not tested
    again for the readout's cause (the rule watches what the readout watches)."""
    rules = (StopRule("non_finite", metrics=WATCHED),) if evaluate else ()
    bound = None if evaluate else bound  # a rule that fires moves a pilot's bound: not compared here
    run = live(tmp_path_factory.mktemp("run"), rules, bound=bound)
    after = ReadoutFold(METRIC, WATCHED, bound)
    for kind, records in batches:
        run._ingest([dict(r) for r in records], 1.0, evaluate, kind)
        after.add(kind, [dict(r) for r in records])
    got, want = run.fold.to_fields(), after.to_fields()
    assert got.keys() == want.keys() and all(same(got[k], want[k]) for k in want), (got, want)
    jsonl = FeedKind.JSONL
    assert run.fold.values(jsonl) == after.values(jsonl) or all(
        same(x, y) for x, y in zip(run.fold.values(jsonl), after.values(jsonl)))
    assert run.fold.at == after.at


def test_a_batch_the_non_finite_rule_passed_is_not_tested_again_for_the_readout(tmp_path,
                                                                                monkeypatch):
    from tui.engine.watching import live as live_module

    tested = []
    real = live_module.first_non_finite
    monkeypatch.setattr(live_module, "first_non_finite",
                        lambda record, names: tested.append(record) or real(record, names))
    run = live(tmp_path, (StopRule("non_finite", metrics=WATCHED),))
    clean = [{"step": s, "loss": 1.0 / (s + 1), METRIC: 0.5} for s in range(50)]
    run._ingest(clean, 1.0, True, FeedKind.JSONL)
    assert tested == [] and run.fold.cause is None
    nan = [{"step": 50, "loss": 0.1}, {"step": 51, "loss": float("nan")}, {"step": 52, "loss": 0.2}]
    # the rule fired: its batch is tested
    assert run._ingest(nan, 1.0, True, FeedKind.JSONL).rule == "non_finite"
    assert run.fold.cause == "loss was nan at step 51" and len(tested) == 2  # up to the cause
