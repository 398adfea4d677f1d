import pytest
"""Loading a plan stays in the planning layers: a started campaign's calibration
comes from its frozen plan, and nothing under `tui.bundle` is imported (checked in
a fresh interpreter's `sys.modules`). Only a campaign that names a prior bundle and
has not started yet reads that bundle, through the bundle layer."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import tomli_w

from enginekit import printer_cmd, write_plan
from tui.campaign import load_plan
from tui.campaign.calibration import Calibration, TaskCalibration, with_calibration_table

REPO = Path(__file__).resolve().parent.parent

LOAD = textwrap.dedent("""
    import json, sys
    from tui.session.session import load_campaign
    plan = load_campaign(sys.argv[1])
    cal = plan.calibration
    print(json.dumps({
        "bundle": sorted(m for m in sys.modules if m == "tui.bundle"
                         or m.startswith("tui.bundle.")),
        "used": cal.used if cal else None,
        "hours": plan.variant("v").hours}))
""")

VARIANT = f"""
[[variant]]
id = "v"
category = "mandatory"
command = {printer_cmd("--steps", "3")}
hours = 40
"""


def load_in_a_fresh_interpreter(path: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", LOAD, str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_loading_a_plan_without_a_prior_imports_nothing_from_the_bundle(tmp_path):
    seen = load_in_a_fresh_interpreter(write_plan(tmp_path, VARIANT))
    assert seen == {"bundle": [], "used": None, "hours": 40}


@pytest.mark.slow
def test_a_started_campaign_gets_its_recorded_calibration_without_the_bundle(tmp_path):
    path = write_plan(tmp_path, VARIANT)
    path.write_text(path.read_text().replace(
        "[campaign]\n", '[campaign]\nprior = "../gone/bundle"\ncalibrated = true\n', 1))
    plan = load_plan(path)
    cal = Calibration("../gone/bundle", "first", "ab" * 32, None, "calibrated",
                      (TaskCalibration("v", "run", 40.0, 0.02, "id", "v-run-1"),))
    plan.state_dir.mkdir()
    (plan.state_dir / "plan.toml").write_text(tomli_w.dumps(
        with_calibration_table(plan.raw, cal)))
    # the prior bundle does not exist: reading it would be refused; it is never read
    seen = load_in_a_fresh_interpreter(path)
    assert seen == {"bundle": [], "used": "calibrated", "hours": 0.02}


@pytest.mark.slow
def test_a_campaign_not_started_with_a_prior_reads_it_through_the_bundle_layer(tmp_path):
    path = write_plan(tmp_path, VARIANT)
    path.write_text(path.read_text().replace(
        "[campaign]\n", '[campaign]\nprior = "../gone/bundle"\n', 1))
    done = subprocess.run([sys.executable, "-c", LOAD, str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "PlanError" in done.stderr
    assert "gone/bundle: refused: no manifest.json there" in done.stderr


def test_a_recorded_calibration_that_cannot_be_read_is_said_not_replaced(tmp_path):
    import pytest

    from tui.campaign.prior import recorded_plan
    from tui.campaign.validate import PlanError

    path = write_plan(tmp_path, VARIANT)
    plan = load_plan(path)
    plan.state_dir.mkdir()
    (plan.state_dir / "plan.toml").write_text("[calibration]\nprior = \n")  # torn
    with pytest.raises(PlanError, match=r"^\.itera/plan\.toml: its \[calibration\] cannot"):
        recorded_plan(plan)
    (plan.state_dir / "plan.toml").write_text(tomli_w.dumps(plan.raw))  # by hand: fine
    assert recorded_plan(plan) is plan


def test_the_wrap_up_says_when_the_frozen_plan_cannot_be_read(tmp_path):
    from tui.bundle.wrapup import frozen_plan

    plan = load_plan(write_plan(tmp_path, VARIANT))
    plan.state_dir.mkdir()
    (plan.state_dir / "plan.toml").write_text("[campaign\n")
    said: list[str] = []
    planned, data = frozen_plan(plan, said.append)
    assert planned is plan and data == b"[campaign\n"  # its bytes are still kept
    assert len(said) == 1 and said[0].startswith(".itera/plan.toml cannot be read (")
    assert str(tmp_path) not in said[0]
