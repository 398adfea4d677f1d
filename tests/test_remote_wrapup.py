"""Two lots on two boxes end in one bundle: each box builds its part, the first box
pulls and merges them, `verify` checks the merged bundle in a fresh process; a box
unreachable at wrap-up is named with what is missing (real sshd, engines, rsync)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from boxkit import end_processes_under, far_ledger, far_root, two_box_campaign, wait_until
from clikit import cli
from conftest import run_cli
from sshkit import needs_sshd
from sshkit import sshd  # noqa: F401 - a fixture

sys.path.insert(0, str(Path(__file__).parent / "scripts"))

from bundlekit import deliver_cmd, write_campaign  # noqa: E402

ONE_BOX = f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {deliver_cmd("--label", "control", "--acc-end", "0.70")}
    minutes = 2

    [[variant]]
    id = "wide"
    category = "useful"
    command = {deliver_cmd("--label", "wide", "--acc-end", "0.80")}
    minutes = 2
"""


def verdict_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("verdict:"))


@needs_sshd
@pytest.mark.slow
def test_two_boxes_end_in_one_verified_bundle(sshd, tmp_path):
    path = two_box_campaign(tmp_path / "first")
    far = far_root(sshd)
    try:
        proc = run_cli("run", "--headless", str(path), cwd=path.parent, env=sshd.client_env,
                       timeout=400)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-4000:]
        assert "box2 (lot b): started in camp: its engine (supervisor pid " in out
        assert "box2: part pulled" in out
        bundle = path.parent / "outputs" / "bundle"
        manifest = json.loads((bundle / "manifest.json").read_text())
        boxes = {r["variant"]: r["box"] for r in manifest["runs"]}
        assert boxes == {"control": "this box", "wide": "box2"}
        assert [b["box"] for b in manifest["boxes"]] == ["box2"]
        assert manifest["boxes"][0]["missing"] is None
        assert manifest["boxes"][0]["part_verified"] is True
        assert [lot["lot"] for lot in manifest["lots"]] == ["a", "b"]
        listed = {f["path"] for f in manifest["files"]}
        wide = next(r["id"] for r in manifest["runs"] if r["variant"] == "wide")
        assert f"runs/{wide}/predictions.jsonl" in listed and "boxes/box2/ledger.jsonl" in listed
        # nothing launched twice: the far ledger and the bundle agree run for run
        far_runs = [json.loads(line)["run"] for line in far_ledger(far).read_text()
                    .splitlines() if '"run_launched"' in line]
        assert far_runs == [wide]
        report = (bundle / "report.md").read_text()
        assert "## Boxes" in report
        assert re.search(r"\| box2 \| b \| wide \| wide \(run\) \| 2 min \| \d+ s \| merged \|",
                         report), report
        assert "94.28" in report  # two three-day RTX 4090 lots, one budget
        text = json.dumps(manifest)
        assert str(far) not in text and str(tmp_path) not in text
        # the first box's status tells the fleet's one state: the bundle's verdict and
        # budget, every box's runs (not "wide never ran" from this box's ledger alone)
        status = json.loads(cli("status", "--json", str(path), cwd=path.parent).stdout)
        assert status["verdict"]["verdict"] == "yes", status["verdict"]
        per = status["budget"]["per_deliverable_usd"]
        assert f"budget: {per:.2f} USD per accepted" in proc.stdout, (per, proc.stdout[-600:])
        assert {(r["variant"], r["state"]) for r in status["runs"] if r["kind"] == "run"} \
            == {("control", "completed"), ("wide", "completed")}, status["runs"]
        # verify in a fresh process
        checked = run_cli("verify", str(bundle), cwd=tmp_path, timeout=300)
        assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-2000:]
        # a second wrap-up on the first box pulls again (nothing new) and merges the same
        again = run_cli("wrapup", str(path), cwd=path.parent, env=sshd.client_env, timeout=300)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
        remade = json.loads((bundle / "manifest.json").read_text())
        assert sorted(r["id"] for r in remade["runs"]) == sorted(r["id"] for r in
                                                                 manifest["runs"])
        # the verdict is the one the same campaign gives on one box
        alone = write_campaign(tmp_path / "alone", ONE_BOX, gpus=2)
        single = run_cli("run", "--headless", str(alone), cwd=alone.parent, timeout=300)
        assert single.returncode == 0, single.stdout[-3000:]
        assert verdict_line(proc.stdout) == verdict_line(single.stdout)
        assert verdict_line(proc.stdout).startswith("verdict: answered yes")
    finally:
        end_processes_under(far)


@needs_sshd
@pytest.mark.slow
def test_a_box_unreachable_at_wrapup_is_named_and_the_rest_verifies(sshd, tmp_path):
    from enginekit import drive
    from tui.bundle.wrapup import build_bundle
    from tui.campaign import load_plan
    from tui.campaign.boxes import box_shares
    from tui.remote.pull import pull_parts
    from tui.remote.start import start_box

    path = two_box_campaign(tmp_path / "first")
    plan = load_plan(path)
    far = far_root(sshd)
    try:
        started = start_box(plan, box_shares(plan)[1], sshd.settings())
        assert started.ok, started.line
        drive(path, timeout=120)  # this box's share (the engine's default: this box)
        wait_until(lambda: '"wrapup_done"' in (far_ledger(far).read_text()
                                               if far_ledger(far).exists() else ""),
                   180, "the second box's part")
        sshd.kill()  # the link is down at wrap-up
        lines = []
        parts = pull_parts(plan, sshd.settings(), say=lines.append, link_grace_s=2,
                           poll_s=0.5)
        assert len(parts) == 1 and not parts[0].merged
        assert parts[0].missing.startswith("unreachable at wrap-up: ")
        result = build_bundle(plan, parts=parts)
        assert result.verified, result.failures
        manifest = json.loads((result.bundle_dir / "manifest.json").read_text())
        assert {r["variant"] for r in manifest["runs"]} == {"control"}
        report = (result.bundle_dir / "report.md").read_text()
        assert "**box2 is missing from this bundle** (unreachable at wrap-up: " in report
        assert "its share (wide) is not in the runs above" in report
        assert "| box2 | b | wide | nothing | 2 min | - | missing: unreachable" in report
        checked = run_cli("verify", str(result.bundle_dir), cwd=tmp_path, timeout=300)
        assert checked.returncode == 0, checked.stdout[-3000:]
    finally:
        end_processes_under(far)


@needs_sshd
@pytest.mark.slow
def test_the_link_drops_the_second_box_goes_on_and_its_rules_fire(sshd, tmp_path):
    """sshd killed once box 2's run is under way: its NaN is stopped there while the link
    is down; the link comes back; the first box's wrap-up pulls everything: one bundle,
    nothing launched twice, nothing lost (the far ledger and its pulled copy compared)."""
    import subprocess

    from conftest import REPO

    wide = deliver_cmd("--label", "wide", "--steps", "60", "--sleep", "0.25", "--nan-at", "12")
    path = two_box_campaign(tmp_path / "first", wide=wide, extra="""
        [[stop]]
        rule = "non_finite"
    """)
    far = far_root(sshd)
    env = dict(__import__("os").environ, PYTHONPATH=str(REPO), **sshd.client_env)
    first = subprocess.Popen([sys.executable, "-m", "tui.cli", "run", "--headless", str(path)],
                             cwd=path.parent, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        def far_events():
            if not far_ledger(far).exists():
                return []
            return [json.loads(line) for line in far_ledger(far).read_text().splitlines()
                    if line.strip().endswith("}")]

        wait_until(lambda: any(e.get("event") == "run_launched" for e in far_events()), 120,
                   "the second box's run to start")
        sshd.kill()  # the link is down from here
        fired = wait_until(lambda: next((e for e in far_events()
                                         if e.get("event") == "stop_rule_fired"), None),
                           120, "box 2's own rule to fire while the link is down")
        assert sshd.proc.poll() is not None  # it fired with no link at all
        assert fired["rule"] == "non_finite"
        wait_until(lambda: any(e.get("event") == "run_exited" for e in far_events()), 60,
                   "the stopped run to exit")
        sshd.start()  # the link is back on the same port
        out, _ = first.communicate(timeout=400)
        assert first.returncode == 0, out[-4000:]
        bundle = path.parent / "outputs" / "bundle"
        manifest = json.loads((bundle / "manifest.json").read_text())
        runs = {r["variant"]: r for r in manifest["runs"]}
        assert runs["wide"]["box"] == "box2" and runs["wide"]["state"] == "stopped"
        assert runs["wide"]["stop"]["rule"] == "non_finite"
        launched = [e for e in far_events() if e.get("event") == "run_launched"]
        assert len(launched) == 1  # nothing launched twice
        pulled = path.parent / ".itera" / "boxes" / "box2" / "state" / "ledger.jsonl"
        assert pulled.read_bytes() == far_ledger(far).read_bytes()  # nothing lost
        checked = run_cli("verify", str(bundle), cwd=tmp_path, timeout=300)
        assert checked.returncode == 0, checked.stdout[-3000:]
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(30)
        end_processes_under(far)


@needs_sshd
@pytest.mark.slow
def test_a_changed_corpus_there_stops_that_box_and_the_first_box_share_still_runs(sshd,
                                                                                  tmp_path):
    import hashlib
    import os
    import shutil

    first = tmp_path / "first"
    (first / "data").mkdir(parents=True)
    blob = b"the fixed corpus\n" * 50
    (first / "data" / "train.txt").write_bytes(blob)
    path = two_box_campaign(first, extra=f"""
        [corpus]
        root = "data"
        files = {{ "train.txt" = "{hashlib.sha256(blob).hexdigest()}" }}
    """)
    far = far_root(sshd)
    far.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(first, far)
    target = far / "data" / "train.txt"
    before = target.stat()
    target.write_bytes(b"Y" + blob[1:])  # same size, same time: only its hash tells
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    try:
        proc = run_cli("run", "--headless", str(path), cwd=first, env=sshd.client_env,
                       timeout=400)
        out = proc.stdout + proc.stderr
        assert ("box2 (lot b): not started: the check there refused the campaign: "
                "corpus.files.\"train.txt\": sha256 mismatch for data/train.txt") in out, out
        assert "launched control-" in out  # this box's share ran
        assert not far_ledger(far).exists()
        bundle = first / "outputs" / "bundle"
        manifest = json.loads((bundle / "manifest.json").read_text())
        assert {r["variant"] for r in manifest["runs"]} == {"control"}
        assert manifest["boxes"][0]["missing"] == "its engine never started in camp there"
        report = (bundle / "report.md").read_text()
        assert "**box2 is missing from this bundle** (its engine never started" in report
        assert "bundle: outputs/bundle (verified)" in proc.stdout
        assert verdict_line(proc.stdout).startswith("verdict: inconclusive")
    finally:
        end_processes_under(far)


@needs_sshd
@pytest.mark.slow
def test_a_torn_pulled_part_is_found_by_its_manifest_and_pulled_again(sshd, tmp_path):
    import os

    from tui.campaign import load_plan
    from tui.campaign.boxes import box_shares
    from tui.remote.pull import pull_part
    from tui.remote.start import start_box

    path = two_box_campaign(tmp_path / "first")
    plan = load_plan(path)
    share = box_shares(plan)[1]
    far = far_root(sshd)
    try:
        assert start_box(plan, share, sshd.settings()).ok
        wait_until(lambda: '"wrapup_done"' in (far_ledger(far).read_text()
                                               if far_ledger(far).exists() else ""),
                   180, "the second box's part")
        first = pull_part(plan, share, sshd.settings(), link_grace_s=5)
        assert first.merged and first.part_verified is True, first
        pulled = path.parent / ".itera" / "boxes" / "box2" / "bundle"
        victim = next(p for p in sorted(pulled.rglob("predictions.jsonl")))
        before = victim.stat()
        data = bytearray(victim.read_bytes())
        data[0] ^= 0x01  # a torn copy: same size, same time, other bytes
        victim.write_bytes(bytes(data))
        os.utime(victim, ns=(before.st_atime_ns, before.st_mtime_ns))
        again = pull_part(plan, share, sshd.settings(), link_grace_s=5)
        assert again.merged and again.part_verified is True, again
        assert victim.read_bytes() == (far / "outputs" / "bundle" /
                                       victim.relative_to(pulled)).read_bytes()
    finally:
        end_processes_under(far)
