"""Wrap-up after a kill -9 of the engine in the middle of a run.

The engine is killed while a run trains; `itera-tui wrapup` then reattaches,
stops that run (checkpoint first) and builds the bundle. For the run that had
finished, the bundle holds exactly what an uninterrupted campaign's bundle
holds; the interrupted run is there too, with its stop reason.
"""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))

from bundlekit import deliver_cmd, manifest, write_campaign  # noqa: E402
from conftest import run_cli  # noqa: E402
from enginekit import drive, kill_9_headless_when  # noqa: E402
from tui.engine import read_ledger  # noqa: E402

pytestmark = pytest.mark.slow  # process tests: real runs, engines, verifiers

VARIANTS = f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {deliver_cmd("--label", "control", "--steps", "5")}
    minutes = 1

    [[variant]]
    id = "slow"
    category = "useful"
    command = {deliver_cmd("--label", "slow", "--steps", "200", "--sleep", "0.05")}
    minutes = 1
"""
COMPARED = ("params", "log", "predictions", "error_analysis")


def entries(bundle: Path, run_id: str) -> dict:
    """A run's files in the manifest, less its probe samples: whether a 10 s sample
    fell inside a 1 s run is timing, not what the restart must preserve."""
    return {f["path"]: (f["bytes"], f["sha256"], f["kind"]) for f in manifest(bundle)["files"]
            if f.get("run") == run_id and not f["path"].endswith("/samples.jsonl")}


def test_wrapup_after_kill_9_matches_an_uninterrupted_campaign(tmp_path):
    # one GPU lane: control first, then slow; the engine dies while slow trains, 5 of its
    # 200 steps in: about 9.7 s left for the kill and the wrap-up's start on a busy box,
    # which must find it still running to reattach it
    killed = write_campaign(tmp_path / "killed", VARIANTS, gpus=1)
    ledger_path = killed.parent / ".itera" / "ledger.jsonl"
    def slow_training():
        launched = [e for e in read_ledger(ledger_path) if e["event"] == "run_launched"
                    and e["target"] == "slow"]
        if not launched:
            return False
        metrics = killed.parent / ".itera" / "runs" / launched[0]["run"] / "metrics.jsonl"
        return metrics.exists() and len(metrics.read_text().splitlines()) >= 5

    kill_9_headless_when(killed, slow_training, what="the slow run to train")
    done = run_cli("wrapup", str(killed), cwd=killed.parent)
    assert done.returncode == 0, done.stdout + done.stderr

    whole = write_campaign(tmp_path / "whole", VARIANTS, gpus=1)
    drive(whole, timeout=60)
    done = run_cli("wrapup", str(whole), cwd=whole.parent)
    assert done.returncode == 0, done.stdout + done.stderr

    a, b = killed.parent / "outputs" / "bundle", whole.parent / "outputs" / "bundle"
    runs_a = {r["variant"]: r for r in manifest(a)["runs"]}
    runs_b = {r["variant"]: r for r in manifest(b)["runs"]}
    control = runs_a["control"]["id"]
    assert runs_b["control"]["id"] == control  # same configuration, same identifier
    assert runs_a["control"]["state"] == runs_b["control"]["state"] == "completed"
    ea, eb = entries(a, control), entries(b, control)
    assert set(ea) == set(eb)
    for rel, (size, sha, kind) in ea.items():
        if kind in COMPARED:
            assert (size, sha) == eb[rel][:2], rel
    assert {k for *_, k in ea.values()} >= {"params", "log", "predictions", "error_analysis"}
    # the interrupted run is kept, with its identifier and its stop reason
    slow = runs_a["slow"]
    assert slow["id"] == runs_b["slow"]["id"] and slow["state"] == "stopped"
    stops = json.loads((a / "stops.json").read_text())
    assert [(s["id"], s["rule"]) for s in stops] == [(slow["id"], "wrapup")]
    events = read_ledger(ledger_path)
    assert [e["run"] for e in events if e["event"] == "run_reattached"] == [slow["id"]]
    assert events[-2]["event"] == "wrapup_done" and events[-2]["verified"] is True
    assert "Verification: **VERIFIED**" in (a / "report.md").read_text()
