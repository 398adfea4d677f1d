"""The wrap-up on a full disk: one clear message, exit 1, no staging left, and a rerun
after space is freed succeeds. The outputs folder is a real 8 kB tmpfs (the test is
skipped, with the reason, where mounting one is not permitted)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))

from bundlekit import delivered_campaign  # noqa: E402
from conftest import run_cli  # noqa: E402
from tui.engine.ledger import read_ledger  # noqa: E402

pytestmark = pytest.mark.slow  # process tests: real runs, engines, verifiers


def mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def full_outputs(tmp_path_factory, tmp_path):
    source = delivered_campaign(tmp_path_factory).parent
    campaign = tmp_path / "campaign"
    shutil.copytree(source, campaign, ignore=shutil.ignore_patterns("outputs"))
    outputs = campaign / "outputs"
    outputs.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command on this machine")
    done = mount("-t", "tmpfs", "-o", "size=8k", "tmpfs", str(outputs))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield campaign, outputs
    finally:
        subprocess.run(["umount", str(outputs)], capture_output=True, timeout=30)


def test_a_full_disk_at_wrap_up_is_named_then_a_rerun_succeeds(full_outputs):
    campaign, outputs = full_outputs
    done = run_cli("wrapup", "campaign.toml", cwd=campaign, timeout=180)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "Traceback" not in said
    failures = [line for line in said.splitlines() if "no space left on device" in line]
    assert len(failures) == 1, said
    assert "outputs/bundle" in failures[0] and str(campaign) not in failures[0]
    assert list(outputs.iterdir()) == []  # the staging is gone, nothing half-built
    events = read_ledger(campaign / ".itera" / "ledger.jsonl")
    assert events and (campaign / ".itera" / "ledger.jsonl").read_bytes().endswith(b"\n")

    assert mount("-o", "remount,size=16m", str(outputs)).returncode == 0  # space freed
    again = run_cli("wrapup", "campaign.toml", "--json", cwd=campaign, timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["verified"] is True
    verify = run_cli("verify", "outputs/bundle", cwd=campaign, timeout=180)
    assert verify.returncode == 0 and verify.stdout.startswith("VERIFIED")
