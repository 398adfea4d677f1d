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
from tui.engine.ledger.file import read_ledger  # noqa: E402

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


def test_a_finished_campaign_restarted_on_a_full_disk_does_not_redo_its_wrap_up(full_outputs):
    """The wrap-up is done and verified; the disk then fills. A headless restart of
    the finished campaign says the bundle is done (never rebuilds it, so never says
    "wrap-up failed" beside "bundle verified"); an explicit wrap-up that cannot write
    says the verified bundle is kept."""
    campaign, outputs = full_outputs
    assert mount("-o", "remount,size=16m", str(outputs)).returncode == 0
    first = run_cli("wrapup", "campaign.toml", cwd=campaign, timeout=180)
    assert first.returncode == 0, first.stdout + first.stderr
    try:
        with open(outputs / "filler", "wb") as f:  # fill what is left of the disk
            while True:
                f.write(b"\0" * 65536)
                f.flush()
    except OSError:
        pass
    again = run_cli("run", "--headless", "campaign.toml", cwd=campaign, timeout=180)
    said = again.stdout + again.stderr
    assert again.returncode == 0, said
    assert "wrap-up failed" not in said and "wrap-up started" not in said
    assert "the wrap-up is done: bundle verified at outputs/bundle" in said
    explicit = run_cli("wrapup", "campaign.toml", cwd=campaign, timeout=180)
    said = explicit.stdout + explicit.stderr
    assert explicit.returncode == 1
    assert "the bundle verified before (outputs/bundle) is kept as it was" in said, said
    (outputs / "filler").unlink()
    verify = run_cli("verify", "outputs/bundle", cwd=campaign, timeout=180)
    assert verify.returncode == 0, verify.stdout
