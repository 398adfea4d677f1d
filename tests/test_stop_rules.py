"""Stop rules as objects: each `[[stop]]` becomes one rule with the same two
questions (per record, per tick), and a non-finite value has one test."""

import math

import pytest

from tui.campaign.plan import StopRule
from tui.engine.rules import (NonFinite, Resume, RuleSet, Stall, Threshold, Tick, Truncation,
                              build, first_non_finite)


@pytest.mark.parametrize("spec, cls", [
    (StopRule("non_finite", metrics=("loss",)), NonFinite),
    (StopRule("threshold", metric="acc", below=0.1), Threshold),
    (StopRule("truncation", metric="truncated", max=0), Truncation),
    (StopRule("resume", within_minutes=5), Resume),
    (StopRule("stall", minutes=2), Stall),
])
def test_each_plan_rule_builds_its_own_object_with_both_questions(spec, cls):
    rule = build(spec)
    assert type(rule) is cls and rule.name == spec.rule
    assert rule.on_record({"step": 1}, 0.0) is None
    assert rule.on_tick(Tick(1.0, 0.0, 0.5, True, "run")) is None


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_the_one_non_finite_test_sees_nan_and_both_infinities(value):
    assert first_non_finite({"loss": 1.0, "aux": value}, ("loss", "aux")) == "aux"


@pytest.mark.parametrize("value", [0.0, -3.5, 10**400 // 10**399, 7, "nan", None, True])
def test_finite_numbers_ints_and_non_floats_are_not_non_finite(value):
    assert first_non_finite({"loss": value}, ("loss",)) is None


def test_non_finite_stops_with_rule_value_step_and_record_time():
    rules = RuleSet((StopRule("non_finite", metrics=("loss",)),), "v", "run")
    stop = rules.on_record({"t": 12.5, "step": 40, "loss": math.nan}, 99.0)
    assert (stop.rule, stop.step, stop.t) == ("non_finite", 40, 12.5)
    assert stop.reason == "loss=nan at step 40"
    assert stop.to_dict()["value"] == "nan"


def test_the_batch_path_and_the_record_path_agree_on_the_first_stop():
    rules = RuleSet((StopRule("non_finite", metrics=("loss",)),), "v", "run")
    records = [{"step": i, "loss": 1.0 / (i + 1)} for i in range(50)]
    records[30]["loss"] = math.inf
    records[40]["loss"] = math.nan
    batch = rules.first_stop(records, 0.0)
    one_by_one = next(s for s in (rules.on_record(r, 0.0) for r in records) if s)
    assert batch == one_by_one and batch.step == 30


def test_threshold_holds_from_its_step_on_and_reads_the_global_step():
    rules = RuleSet((StopRule("threshold", metric="acc", below=0.5, from_step=100),), "v",
                    "run")
    assert rules.on_record({"step": 99, "acc": 0.1}, 0.0) is None
    stop = rules.on_record({"step": 5, "global_step": 105, "acc": 0.1}, 0.0)
    assert stop.rule == "threshold" and stop.step == 105
    assert "below 0.5 at step 105 (printed 5)" in stop.reason
    above = RuleSet((StopRule("threshold", metric="loss", above=3.0),), "v", "run")
    assert above.on_record({"step": 1, "loss": 2.0}, 0.0) is None
    assert "above 3" in above.on_record({"step": 1, "loss": 4.0}, 0.0).reason


def test_truncation_fires_past_its_max_only():
    rules = RuleSet((StopRule("truncation", metric="truncated", max=2),), "v", "run")
    assert rules.on_record({"step": 1, "truncated": 2}, 0.0) is None
    assert rules.on_record({"step": 1, "truncated": 3}, 0.0).rule == "truncation"


def test_a_failed_resume_check_record_fires_resume_and_a_passed_one_does_not():
    rules = RuleSet((StopRule("resume"),), "v", "run")
    assert rules.on_record({"event": "resume_check", "ok": True}, 0.0) is None
    stop = rules.on_record({"event": "resume_check", "ok": False, "max_abs_diff": 0.3}, 0.0)
    assert stop.rule == "resume" and stop.value == 0.3


def test_tick_rules_read_the_time_since_the_first_and_the_last_record():
    """`stall` counts from the last record (or the start); `resume` from the run's first
    record: start-up before it does not count, and with no record yet it never fires."""
    rules = RuleSet((StopRule("stall", minutes=1), StopRule("resume", within_minutes=2)),
                    "v", "run")
    assert rules.on_tick(100.0, 0.0, 50.0, False, "run", first_record=10.0) is None
    assert rules.on_tick(111.0, 0.0, 50.0, True, "run", first_record=10.0).rule == "stall"
    assert rules.on_tick(131.0, 0.0, 120.0, False, "run", first_record=10.0).rule == "resume"
    assert rules.on_tick(121.0, 0.0, 120.0, False, "run", first_record=10.0) is None  # 111 s
    assert rules.on_tick(121.0, 0.0, 120.0, False, "run") is None  # no record: no clock yet
    assert rules.on_tick(131.0, 0.0, 120.0, False, "step", first_record=10.0) is None
    assert rules.on_tick(131.0, 0.0, 120.0, True, "run", first_record=10.0) is None


def test_rules_for_another_variant_are_not_built_for_this_run():
    rules = RuleSet((StopRule("non_finite", metrics=("loss",), variants=("w",)),), "v", "run")
    assert rules.rules == () and rules.on_record({"loss": math.nan}, 0.0) is None
