"""Two boxes never drive one campaign (issue 45, item 1), with real engines and a real
S3 API (moto on 127.0.0.1, tests/storekit.py): two `resume`s of one store started
together end with one engine driving and every cut run launched once; a `resume
--force` while the old engine lives supersedes it: the old engine stops its runs
after a checkpoint, says so, and the store only grows from the new box from then on.

Every process a test starts is ended by pid in a `finally` (`kill_box`, `_end`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from clikit import cli
from conftest import REPO, needs
from enginekit import copy_scripts
from servicekit import engine_pids, wait_until
from storekit import aws_env, s3  # noqa: F401  (s3: the fixture)
from test_box_move_store import kill_box, long_runs, of, resume, start_mid_runs, stored_view
from tui.store.lease import Local

pytestmark = [needs("s3fs", "moto", "torch"), pytest.mark.slow]

LOT = 'gpu = "cpu", days = 1, price_usd = 12'


def start_resume(url: str, dest: Path, endpoint: str) -> subprocess.Popen:
    """`itera-tui resume` as run_cli runs it, without waiting for it."""
    env = dict(os.environ, **aws_env())
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, "-m", "tui.cli", "resume", url, str(dest),
                             "--lot", LOT, "--option", f"endpoint_url={endpoint}"],
                            cwd=dest.parent, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(30)


def stored_ledger_bytes(endpoint: str, prefix: str) -> bytes:
    from tui.store import open_store, read_index, read_ledger as stored_ledger

    store = open_store(f"s3://camp/{prefix}", {"endpoint_url": endpoint})
    return stored_ledger(store, "lot1", read_index(store, "lot1"))


def continued(root: Path) -> list[dict]:
    if not (root / ".itera/ledger.jsonl").exists():
        return []
    return [e for e in of(root, "run_launched") if e.get("resumes")]


def test_two_resumes_started_together_leave_one_engine_driving(s3, tmp_path):
    s3.make_bucket("camp")
    old, one, two = tmp_path / "old", tmp_path / "one", tmp_path / "two"
    try:
        start_mid_runs(old, s3.endpoint)
        runs = [r for r in long_runs(old) if r.alive]
        for pid in engine_pids(old, "supervise") + engine_pids(old, "engine"):
            os.kill(pid, signal.SIGTERM)  # the box goes down: its lease is released
        for run in runs:
            os.killpg(run.pid, signal.SIGTERM)
        wait_until(lambda: not engine_pids(old), 120, "the engine to go")
    finally:
        kill_box(old)
    cut = {r.id for r in runs}
    for d in (one, two):
        d.mkdir()
        copy_scripts(d)
    procs = []
    try:
        procs = [start_resume("s3://camp/team", d, s3.endpoint) for d in (one, two)]
        outs = [p.communicate(timeout=300) for p in procs]
        codes = [p.returncode for p in procs]
        assert sorted(codes) == [0, 2], (codes, outs)
        won, lost = (one, two) if codes[0] == 0 else (two, one)
        said = outs[codes.index(2)][1]
        holder = Local.read(won / ".itera").holder
        # the loser refuses in words naming the box that holds the campaign
        assert holder in said and "nothing was started" in said, said
        assert not (lost / ".itera").exists() and not engine_pids(lost)
        wait_until(lambda: {e["resumes"] for e in continued(won)} == cut, 180,
                   "every cut run continued on the winner")
        launched = Counter(e["resumes"] for d in (one, two) for e in continued(d))
        assert launched == {rid: 1 for rid in cut}, launched  # each paid for once
        assert engine_pids(won) and not engine_pids(lost)
    finally:
        for p in procs:
            _end(p)
        kill_box(one)
        kill_box(two)


def test_a_forced_resume_supersedes_the_old_engine_which_stops_and_writes_no_more(
        s3, tmp_path):
    s3.make_bucket("camp")
    old, new = tmp_path / "old", tmp_path / "new"
    new.mkdir()
    copy_scripts(new)
    try:
        start_mid_runs(old, s3.endpoint)
        live = {r.id for r in long_runs(old) if r.alive}
        # the old engine lives and holds a fresh lease: refused without --force
        held = resume("s3://camp/team", new, s3.endpoint)
        assert held.returncode == 2 and "holds this campaign" in held.stderr \
            and "--force" in held.stderr, held.stderr
        assert not (new / ".itera").exists()
        done = resume("s3://camp/team", new, s3.endpoint, "--force")
        assert done.returncode == 0, done.stdout + done.stderr
        holder = Local.read(new / ".itera").holder
        # the old engine, on its next check: its runs checkpoint, then stop; it goes
        wait_until(lambda: of(old, "box_checkpointed") and not engine_pids(old), 180,
                   "the old engine to stop its runs and go")
        wait_until(lambda: {e["resumes"] for e in continued(new)} >= live, 180,
                   "the new box continuing the cut runs")
        # what the new box stores from now on: wait for a push that names its launches
        wait_until(lambda: b'"resumes"' in stored_ledger_bytes(s3.endpoint, "team"), 120,
                   "the new box's ledger in the store")
        stored = stored_ledger_bytes(s3.endpoint, "team")
    finally:
        kill_box(old)
        kill_box(new)
    (down,) = of(old, "box_going_down")
    assert down["signal"] == "superseded" and holder in down["notice"], down
    assert "superseded by box" in down["notice"]
    (kept,) = of(old, "box_checkpointed")
    assert set(kept["saved"]) >= live  # each stopped after a verified checkpoint
    assert not kept["unsaved"]
    state_old = [r for r in long_runs(old) if r.id in live]
    assert all(not r.alive for r in state_old)
    assert any("superseded by box" in e["message"] for e in of(old, "warning"))
    assert "superseded by box" in (old / ".itera/engine.log").read_text()
    status = json.loads(cli("status", "--json", str(old / "campaign.toml"),
                            cwd=old).stdout)
    assert any("superseded by box" in w["message"] for w in status["warnings"])
    # the store's ledger only extends from the new box: none of the old box's last lines
    assert (new / ".itera/ledger.jsonl").read_bytes().startswith(stored)
    assert b"superseded" not in stored
    moved_t = of(new, "campaign_moved")[0]["t"]
    assert not [e for e in of(old, "run_launched") if e["t"] >= moved_t]
    launched = Counter((e["target"], e["kind"], e["attempt"]) for e in of(new, "run_launched"))
    assert set(launched.values()) == {1}
    view = stored_view(s3.endpoint, "team")
    assert view is not None and view[1].moves  # the store's ledger is the new box's
