"""The seed document's arithmetic, reproduced through the public API."""

import pytest

from tui.campaign import (build_calendar, check_summary, deliverable_budget, plan_cost,
                          plan_from_dict)
from tui.campaign.pricing import Rejection


def seq_plan(extra_hours: float = 0.0, lots=None) -> dict:
    steps = [{"id": "prep", "who": "human", "hours": 8},
             {"id": "data", "who": "machine", "hours": 10, "after": ["prep"]}]
    variants = [{"id": "control", "category": "mandatory", "command": ["true"],
                 "hours": 30, "after": []}]
    if extra_hours:
        variants.append({"id": "variant_b", "category": "useful", "command": ["true"],
                         "hours": extra_hours, "after": ["control"]})
    return {"campaign": {"name": "seed", "question": "q", "wrapup_hours": 0,
                         "retrieval_hours": 0},
            "lot": lots or [{"gpu": "RTX 4090", "days": 3}],
            "step": steps, "variant": variants}


def load(raw, tmp_path):
    return plan_from_dict(raw, tmp_path / "campaign.toml")


def test_48_hours_sequential_in_3_day_lot_leaves_24(tmp_path):
    summary = check_summary(load(seq_plan(), tmp_path))
    assert summary["window_hours"] == 72
    assert summary["end_to_end_hours"] == 48
    assert summary["slack_hours"] == 24
    assert summary["fits"] is True
    assert summary["advice"] == []


def test_30_more_hours_make_78_six_over_and_advice_names_7_day_lot(tmp_path):
    summary = check_summary(load(seq_plan(extra_hours=30), tmp_path))
    assert summary["end_to_end_hours"] == 78
    assert summary["over_hours"] == 6
    assert summary["slack_hours"] == -6
    assert summary["fits"] is False
    longer = [a for a in summary["advice"] if a["kind"] == "longer_lot"]
    assert longer and longer[0]["days"] == 7 and longer[0]["price_usd"] == 110.0
    assert longer[0]["new_slack_hours"] == 168 - 78
    drop = [a for a in summary["advice"] if a["kind"] == "drop_optional"]
    assert drop[0]["drop"] == ["variant_b"] and drop[0]["fits"] is True
    # variant_b runs after control: a second lot cannot help a dependent chain
    assert not [a for a in summary["advice"] if a["kind"] == "second_lot"]


def test_two_3_day_lots_cost_94_28(tmp_path):
    lots = [{"id": "a", "gpu": "RTX 4090", "days": 3}, {"id": "b", "gpu": "RTX 4090", "days": 3}]
    cost = plan_cost(load(seq_plan(lots=lots), tmp_path))
    assert cost.lots == 94.28
    assert cost.total == 94.28


def test_b200_lot_with_two_gpus_is_one_price(tmp_path):
    lots = [{"gpu": "B200", "days": 3, "gpus": 2, "price_usd": 300.0}]
    cost = plan_cost(load(seq_plan(lots=lots), tmp_path))
    assert cost.lots == 300.0


def test_expenses_are_kept_apart(tmp_path):
    raw = seq_plan()
    raw["expense"] = [{"name": "object storage", "usd": 3.5}]
    cost = plan_cost(load(raw, tmp_path))
    assert (cost.lots, cost.expenses, cost.total) == (47.14, 3.5, 50.64)


def test_two_distinct_accepted_deliverables_cost_23_57_each():
    b = deliverable_budget(47.14, 0.0, ["corpus-a", "corpus-b"])
    assert b.per_deliverable_usd == 23.57
    assert b.defined


def test_five_repeats_of_one_deliverable_count_once():
    b = deliverable_budget(47.14, 0.0, ["corpus-a"] * 5)
    assert len(b.accepted) == 1
    assert b.per_deliverable_usd == 47.14


def test_zero_accepted_is_undefined_with_incurred_cost_and_causes():
    b = deliverable_budget(47.14, 2.0, [], [Rejection("control-1a2b-1", "non_finite loss=nan at step 40")])
    assert b.per_deliverable_usd is None
    assert b.to_dict()["ratio"] == "undefined"
    assert b.incurred_usd == 49.14
    text = b.summary()
    assert "undefined" in text and "49.14" in text and "non_finite" in text
    assert "0.00 USD per" not in text


def test_other_gpus_need_an_explicit_price(tmp_path):
    from tui.campaign import PlanError
    with pytest.raises(PlanError) as err:
        load(seq_plan(lots=[{"gpu": "H100", "days": 3}]), tmp_path)
    assert "lot[0].price_usd" in str(err.value) and "no catalog price" in str(err.value)


def test_latest_start_and_critical_path(tmp_path):
    plan = load(seq_plan(), tmp_path)
    cal = build_calendar(plan)
    assert cal.latest_starts(plan) == {"control": 42.0}
    # wrap-up and retrieval take 0 h here: the path is the chain that sets the end
    assert cal.critical_path == ("prep", "data", "control")
    assert {e.id for e in cal.entries if e.critical} == {"prep", "data", "control"}


def test_wrapup_and_retrieval_with_hours_end_the_critical_path(tmp_path):
    raw = seq_plan()
    raw["campaign"].update(wrapup_hours=2, retrieval_hours=1)
    cal = build_calendar(load(raw, tmp_path))
    assert cal.end_to_end_hours == 51
    assert cal.critical_path == ("prep", "data", "control", "wrapup", "retrieval")
