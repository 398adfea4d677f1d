"""A box that goes away: it announces its end (a shutdown's SIGTERM to everything at
once), or it dies (SIGKILL, its folder gone); the campaign continues on the next box.

Real processes throughout: the detached engine and its supervisor (`engine start`),
SDK runs saving real torch checkpoints, verified in the fresh verifier process.
Every test ends what it started by pid (`servicekit.end_engine`) in a `finally`.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import psutil
import pytest

from clikit import cli
from conftest import run_cli
from enginekit import script_cmd, write_plan
from servicekit import end_engine, engine_pids, wait_until
from tui.engine import read_ledger, replay

pytestmark = pytest.mark.slow

STEPS = 300
RESUMABLE = ("resumable.py", "--steps", str(STEPS), "--sleep", "0.1")
VARIANTS = "".join(f"""
[[variant]]
id = "{vid}"
category = "{cat}"
command = {script_cmd(*RESUMABLE, "--acc", acc)}
minutes = 1
""" for vid, cat, acc in (("control", "mandatory", "0.5"), ("b", "useful", "0.7")))
CHECKPOINTS = "[checkpoint]\nevery_minutes = 0.05\n"  # every 3 s: a few per run


def events(root: Path) -> list[dict]:
    return read_ledger(root / ".itera" / "ledger.jsonl")


def of(root: Path, kind: str) -> list[dict]:
    return [e for e in events(root) if e["event"] == kind]


def steps_logged(root: Path, rid: str) -> list[int]:
    path = root / ".itera" / "runs" / rid / "metrics.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if "event" not in record:
            out.append(record["step"])
    return out


def full_runs_checkpointed(root: Path, n_records: int) -> bool:
    """Both full runs are live, past `n_records` steps, each with a verified checkpoint."""
    state = replay(events(root))
    runs = [r for r in state.runs if r.kind == "run" and r.alive]
    return len(runs) == 2 and all(r.last_verified_checkpoint is not None
                                  and len(steps_logged(root, r.id)) >= n_records
                                  for r in runs)


def start_engine(root: Path) -> None:
    proc = run_cli("engine", "start", str(root / "campaign.toml"), cwd=root, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_a_box_that_announces_its_end_checkpoints_every_run_and_the_next_engine_goes_on(
        tmp_path):
    write_plan(tmp_path, VARIANTS, extra=CHECKPOINTS, gpus=2)
    try:
        start_engine(tmp_path)
        wait_until(lambda: full_runs_checkpointed(tmp_path, 15), 150,
                   "two full runs with a verified checkpoint each")
        supervisor = engine_pids(tmp_path, "supervise")
        engine = engine_pids(tmp_path, "engine")
        runs = [r for r in replay(events(tmp_path)).runs if r.alive]
        # a shutdown: SIGTERM to the supervisor, the engine and every run at once
        for pid in supervisor + engine:
            os.kill(pid, signal.SIGTERM)
        for run in runs:
            os.killpg(run.pid, signal.SIGTERM)
        wait_until(lambda: not engine_pids(tmp_path), 90, "the engine and supervisor to go")

        (down,) = of(tmp_path, "box_going_down")
        assert down["signal"] == "SIGTERM" and sorted(down["runs"]) == sorted(r.id for r in runs)
        (kept,) = of(tmp_path, "box_checkpointed")
        assert sorted(kept["saved"]) == sorted(r.id for r in runs) and kept["unsaved"] == []
        assert not of(tmp_path, "engine_restarted")  # the supervisor did not bring it back
        state = replay(events(tmp_path))
        for run in runs:
            after = state.run(run.id)
            assert after.state == "cut", (run.id, after.state)  # not failed, not done
            last = after.last_verified_checkpoint
            # no lost steps beyond the last save: the signal's own checkpoint is the last step
            assert last.path == kept["saved"][run.id]
            assert last.step == steps_logged(tmp_path, run.id)[-1] < STEPS
            assert not psutil.pid_exists(run.pid) or psutil.Process(run.pid).status() == \
                psutil.STATUS_ZOMBIE
        # the box comes back (a reboot, the folder kept): the next engine continues each
        # cut run from that checkpoint, under a new attempt, and the campaign ends
        start_engine(tmp_path)
        wait_until(lambda: of(tmp_path, "wrapup_done"), 240, "the campaign's wrap-up")
        state = replay(events(tmp_path))
        for run in runs:
            (follower,) = [r for r in state.runs if r.resumes == run.id]
            assert follower.attempt == run.attempt + 1 and follower.state == "completed"
            saved = state.run(run.id).last_verified_checkpoint
            assert follower.resume_from == saved.path
            assert steps_logged(tmp_path, follower.id)[0] == saved.step + 1
            assert steps_logged(tmp_path, follower.id)[-1] == STEPS
        status = json.loads(cli("status", "--json", str(tmp_path / "campaign.toml"),
                                cwd=tmp_path).stdout)
        assert sorted(status["budget"]["accepted_configs"]) and \
            status["conclusion"]["winners"] == ["b"]
    finally:
        end_engine(tmp_path)
