"""A torchrun command works as a run: 2 processes, gloo on CPU, 2 lanes."""

import json
import sys

import pytest

from conftest import REPO
from enginekit import drive, write_plan
from tui.engine import read_ledger

pytestmark = pytest.mark.slow  # process tests: real runs, engines, verifiers


def test_torchrun_two_processes_as_one_run_on_two_lanes(tmp_path):
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", "2", str(REPO / "tests/scripts/ddp_train.py")]
    variants = f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {json.dumps(argv)}
    minutes = 1
    gpus = 2
    """
    path = write_plan(tmp_path, variants, gpus=2)
    engine = drive(path, timeout=180)
    (run,) = engine.state.runs
    assert run.state == "completed", (tmp_path / ".itera/runs" / run.id / "stderr.log").read_text()
    launched = next(e for e in read_ledger(tmp_path / ".itera/ledger.jsonl")
                    if e["event"] == "run_launched")
    assert launched["devices"] == "0,1" and launched["lanes"] == ["lot1:0", "lot1:1"]
    run_dir = tmp_path / ".itera/runs" / run.id
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "loss" in r]
    assert [r["step"] for r in steps] == list(range(1, 11))  # rank 0 only: no duplicates
    assert all(r["world_size"] == 2 and r["rank_sum"] == 3.0 for r in steps)
    stdout = (run_dir / "stdout.log").read_text()
    assert "rank 0/2 done, CUDA_VISIBLE_DEVICES=0,1" in stdout
    assert "rank 1/2 done, CUDA_VISIBLE_DEVICES=0,1" in stdout
    acks = [r for r in records if r.get("event") == "checkpoint"]
    assert len(acks) == 1  # only rank 0 wrote
    assert run.checkpoints and run.checkpoints[0].step == 10


def test_a_torchrun_run_that_ignores_sigterm_is_killed_with_every_rank(tmp_path):
    """The `non_finite` rule's SIGTERM goes to the run's process group (torchrun's agent
    and both ranks); the ranks ignore it, so past the grace the engine sends SIGKILL to
    the group: no rank and no agent is left behind (issue 34, item 13)."""
    import os

    import psutil

    from enginekit import wait_for

    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", "2", "scripts/ddp_ignore_term.py", "--nan-at", "5"]
    path = write_plan(tmp_path, f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {json.dumps(argv)}
    minutes = 2
    gpus = 2

    [[stop]]
    rule = "non_finite"
    metrics = ["loss"]
    """, gpus=2)
    pids: set[int] = set()
    try:
        engine = drive(path, timeout=180)
        (run,) = engine.state.runs
        run_dir = tmp_path / ".itera/runs" / run.id
        for rank in (0, 1):
            pids.update(int(p) for p in (run_dir / f"rank-{rank}.pid").read_text().split())
        assert run.state == "stopped" and run.stop.rule == "non_finite"
        kinds = [e["event"] for e in read_ledger(tmp_path / ".itera/ledger.jsonl")]
        assert "run_stop_requested" in kinds and "run_killed" in kinds  # SIGTERM ignored

        def none_left() -> bool:
            return not any(psutil.pid_exists(p) and psutil.Process(p).status()
                           != psutil.STATUS_ZOMBIE for p in pids)
        wait_for(none_left, timeout=30, what="every rank and the agent to be gone")
        assert len(pids) == 3  # two ranks and the one agent they share
    finally:
        for pid in pids:  # whatever the outcome, nothing of this test outlives it
            try:
                os.kill(pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
