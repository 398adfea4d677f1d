"""The keys of planning from evidence: `[campaign] prior`/`calibrated`, `[[lot]] order`,
and the `[calibration]` table a frozen plan keeps (pure: no bundle, no engine)."""

from pathlib import Path

import pytest
import tomli_w

from clikit import cli
from tui.campaign import PlanError, build_calendar, plan_from_dict
from tui.campaign.calibration import (Calibration, TaskCalibration, apply_calibration,
                                      with_calibration_table)

HERE = Path("/nowhere/campaign.toml")


def raw(**campaign) -> dict:
    return {"campaign": {"name": "n", "question": "q", **campaign},
            "lot": [{"gpu": "RTX 4090", "days": 3, "order": "IGPU-7"}],
            "pilot": {"steps": 10},
            "step": [{"id": "data_check", "kind": "data_check", "minutes": 30,
                      "command": ["python", "check.py"]}],
            "variant": [{"id": "control", "category": "mandatory", "hours": 40, "steps": 100,
                         "command": ["python", "t.py"]},
                        {"id": "b", "category": "useful", "hours": 40, "steps": 100,
                         "command": ["python", "t.py", "--lr", "1"]}]}


def calibration(used: str) -> Calibration:
    tasks = (TaskCalibration("control", "run", 40, 0.5, "id", "control-aa-1"),
             TaskCalibration("pilot:control", "pilot", 4, 0.1, "id", "control-bb-1",
                             (("startup_s", 30.0), ("step_s", 1.5))),
             TaskCalibration("b", "run", 40, None, note="nothing measured matches"),
             TaskCalibration("data_check", "step", 0.5, 0.05, "id", "data_check-cc-1"),
             TaskCalibration("retrieval", "retrieval", 0.25, 0.01, "bundle size", "9 bytes"))
    return Calibration("../first/outputs/bundle", "first", "ab" * 32, None, used, tasks)


def test_the_keys_load_and_the_calibration_round_trips_through_the_frozen_toml():
    plan = plan_from_dict(raw(prior="../first/outputs/bundle", calibrated=True), HERE, False)
    assert plan.campaign.prior == "../first/outputs/bundle" and plan.campaign.calibrated
    assert plan.lots[0].order == "IGPU-7"
    assert plan.order_references()[0]["order"] == "IGPU-7"
    hand = build_calendar(plan)
    cal = calibration("calibrated")
    calibrated = apply_calibration(plan, cal)
    assert calibrated.variant("control").hours == 0.5
    assert calibrated.variant("control").pilot_hours == 0.1
    assert calibrated.variant("b").hours == 40  # nothing measured: stays as written
    assert calibrated.step("data_check").hours == 0.05
    assert calibrated.campaign.retrieval_hours == 0.01
    entries = {e.id: e for e in build_calendar(calibrated).entries}
    assert entries["pilot:control"].task.hours == 0.1 and entries["control"].task.hours == 0.5
    assert build_calendar(calibrated).end_to_end_hours < hand.end_to_end_hours
    # the frozen plan: TOML text, read back to the same calibration and the same calendar
    text = tomli_w.dumps(with_calibration_table(plan.raw, cal))
    import tomllib

    frozen = plan_from_dict(tomllib.loads(text), HERE, False)
    assert frozen.calibration == cal
    assert build_calendar(frozen).end_to_end_hours == build_calendar(calibrated).end_to_end_hours
    shown = apply_calibration(plan, calibration("hand-written"))
    assert shown.variant("control").hours == 40 and shown.calibration.used == "hand-written"


def test_a_damaged_calibration_table_names_the_key():
    data = raw()
    data["calibration"] = with_calibration_table({}, calibration("calibrated"))["calibration"]
    data["calibration"]["tasks"]["ghost"] = {"kind": "run", "hand_hours": 1}
    data["calibration"]["used"] = "both"
    with pytest.raises(PlanError) as err:
        plan_from_dict(data, HERE, False)
    assert 'calibration.tasks."ghost": no variant, pilot or step of this plan has this id' \
        in err.value.problems
    assert 'calibration.used: expected hand-written|calibrated, got "both"' in err.value.problems


@pytest.mark.parametrize("extra,needle", [
    ('prior = ""', "campaign.prior: must not be empty"),
    ('prior = "/srv/first/outputs/bundle"', "campaign.prior: give the bundle relative"),
    ("calibrated = true", "campaign.calibrated: needs campaign.prior"),
    ('prior = "b"\ncalibrated = "yes"', 'campaign.calibrated: expected true or false, got "yes"'),
    ('prior = "nowhere/bundle"', "prior "),
])
def test_bad_prior_keys_are_one_clear_message(write_campaign, extra, needle):
    path = write_campaign(f"""
        [campaign]
        name = "n"
        question = "q"
        {extra}

        [[lot]]
        gpu = "RTX 4090"
        days = 3

        [[variant]]
        id = "control"
        category = "mandatory"
        command = ["python", "t.py"]
        hours = 1
    """)
    proc = cli("check", str(path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert needle in proc.stderr, proc.stderr
    if extra == 'prior = "nowhere/bundle"':
        assert "refused: no manifest.json there" in proc.stderr


def test_a_bad_order_names_the_key(write_campaign):
    path = write_campaign("""
        [campaign]
        name = "n"
        question = "q"

        [[lot]]
        gpu = "RTX 4090"
        days = 3
        order = 42

        [[variant]]
        id = "control"
        category = "mandatory"
        command = ["python", "t.py"]
        hours = 1
    """)
    proc = cli("check", str(path))
    assert proc.returncode == 2 and "lot[0].order: expected a string, got 42" in proc.stderr
