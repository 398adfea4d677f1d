"""Path rules of the bundle (pure, fast) and wrap-ups with little or nothing to bundle."""

import json
import os
import sys
import tempfile
from pathlib import Path


sys.path.insert(0, str(Path(__file__).parent / "scripts"))

from bundlekit import deliver_cmd, write_campaign  # noqa: E402
from tui.bundle.paths import Scrubber, find_machine_paths, machine_needles  # noqa: E402
from tui.bundle.bundle_check import verify_bundle  # noqa: E402
from tui.bundle.wrapup import build_bundle  # noqa: E402
from tui.campaign import load_plan  # noqa: E402
from tui.engine import Engine  # noqa: E402


def test_scrubber_rewrites_the_campaign_dir_and_the_home_only_on_path_boundaries():
    s = Scrubber(Path("/home/ann/camp"), home="/home/ann")
    assert s.text("/home/ann/camp/.itera/runs/r1/x") == "./.itera/runs/r1/x"
    assert s.text("cfg at /home/ann/other.toml") == "cfg at ~/other.toml"
    assert s.text("/home/anna/x and /home/ann/campaign2") == "/home/anna/x and ~/campaign2"
    data, changed = s.data(b"\x00\x01/home/ann/camp")  # binary is left alone
    assert not changed and data == b"\x00\x01/home/ann/camp"


def test_needles_find_temp_home_and_the_bundles_own_directories(tmp_path):
    bundle = tmp_path / "camp" / "outputs" / "bundle"
    needles = machine_needles(bundle)
    temp = tempfile.gettempdir()
    found = find_machine_paths(f'{{"cache": "{temp}/x"}}', needles)
    assert found and found[0].startswith("mentions a temporary directory")
    assert find_machine_paths("relative ./tmp/x and outputs/tmp/y", needles) == []
    home = os.path.expanduser("~")
    assert find_machine_paths(f"see {home}/data", needles)[0].startswith(
        "mentions the home directory")
    hits = find_machine_paths(f"written in {tmp_path / 'camp'}", needles)
    assert any("line 1" in h for h in hits)


def test_wrapup_of_a_campaign_that_launched_nothing(tmp_path):
    path = write_campaign(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {deliver_cmd("--label", "control")}
        minutes = 1
    """)
    plan = load_plan(path, check_files=False)
    from fakewrapup import FakeWrapup

    helpers = FakeWrapup()  # git, the drawer and the verifier: the wrap-up's stand-ins
    result = build_bundle(plan, helpers=helpers)  # no ledger, no frozen plan: nothing ran
    # the bundle is built and explains itself, but a bundle of no run verifies nothing
    no_run = {"path": "manifest.json",
              "problem": "holds no run: a bundle with nothing run proves nothing"}
    assert not result.verified and result.failures == [no_run]
    manifest = json.loads((result.bundle_dir / "manifest.json").read_text())
    assert manifest["runs"] == [] and manifest["plan"]["path"] is None
    report = (result.bundle_dir / "report.md").read_text()
    assert "undefined" in report and "no full run was made" in report
    assert "variant control (mandatory) never ran" in report

    Engine(plan).open().close()  # a campaign started, then wrapped up at once
    messages = []
    result = build_bundle(plan, progress=messages.append, helpers=helpers)
    assert result.failures == [no_run] and (result.bundle_dir / "plan.toml").is_file()
    assert messages[-1].startswith("bundle NOT VERIFIED: outputs/bundle")
    assert verify_bundle(result.bundle_dir, reload=False).failures == [no_run]
