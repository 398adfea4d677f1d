"""A campaign continues on a new box from its store, a real S3 API (moto's server on
127.0.0.1, tests/storekit.py): the box dies (SIGKILL to everything, its folder
deleted) or announces its end (SIGTERM to everything at once), and `itera-tui resume
s3://...` in a fresh folder carries the campaign on; a damaged object in the store
(one byte of a checkpoint, a truncated ledger) is named and refused, nothing started.

Every process a test starts is ended by pid in a `finally` (`kill_box`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from clikit import cli
from conftest import needs, run_cli
from enginekit import copy_scripts, script_cmd, write_plan
from servicekit import engine_pids, kill_box, wait_until
import storekit
from storekit import aws_env, s3  # noqa: F401  (s3: the fixture)
from tui.engine import read_ledger, replay
from tui.engine.lost_work import cut_runs
from tui.store.mirror import PUSH_EVERY_S

pytestmark = [needs("s3fs", "moto", "torch"), pytest.mark.slow]

INTERVAL_S = 3.0
CHECKPOINTS = f"[checkpoint]\nevery_minutes = {INTERVAL_S / 60}\n"
# an accepted run leaves predictions.jsonl (resumable.py): a run that finished on the old
# box counts on the new one only if the store carried its deliverable there
DELIVERABLES = '[deliverables]\nfiles = ["predictions.jsonl"]\n'



LONG = 800  # steps of a full run the box dies in the middle of, and of its uninterrupted twin


def variants(steps: int) -> str:
    return "".join(f"""
[[variant]]
id = "{vid}"
category = "{cat}"
command = {script_cmd("resumable.py", "--steps", str(n), "--sleep", "0.05", "--acc", acc)}
minutes = 1
""" for vid, cat, n, acc in (("control", "mandatory", steps, "0.5"),
                             ("b", "useful", steps, "0.7"),
                             ("quick", "exploratory", 8, "0.6")))


def plan_in(root: Path, endpoint: str, prefix: str, steps: int = 400) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    return write_plan(root, variants(steps), gpus=3, extra=CHECKPOINTS + DELIVERABLES + f"""
[store]
url = "s3://camp/{prefix}"
options = {{ endpoint_url = "{endpoint}" }}
""")


def events(root: Path) -> list[dict]:
    return read_ledger(root / ".itera" / "ledger.jsonl")


def of(root: Path, kind: str) -> list[dict]:
    return [e for e in events(root) if e["event"] == kind]


def steps_logged(root: Path, rid: str) -> list[int]:
    path = root / ".itera" / "runs" / rid / "metrics.jsonl"
    if not path.exists():
        return []
    return [r["step"] for r in map(json.loads, path.read_text().splitlines())
            if "event" not in r]


def stored_checkpoints(root: Path) -> dict[str, list[str]]:
    """run -> the checkpoint keys the mirror says it stored (store_object events)."""
    out: dict[str, list[str]] = {}
    for e in of(root, "store_object"):
        if e["kind"] == "checkpoint":
            out.setdefault(e["run"], []).append(e["key"])
    return out


def long_runs(root: Path) -> list:
    return [r for r in replay(events(root)).runs if r.kind == "run" and r.target != "quick"]


def stored_view(endpoint: str, prefix: str):
    """(index, state of the stored ledger) of the S3 store's `lot1` as a new box reads
    them (storekit.stored_view)."""
    return storekit.stored_view(f"s3://camp/{prefix}", "lot1", {"endpoint_url": endpoint})


def resumable_in_store(endpoint: str, prefix: str) -> set[str]:
    """Runs a resume elsewhere can continue from (storekit.resumable_runs)."""
    return storekit.resumable_runs(stored_view(endpoint, prefix), "lot1")


def mid_full_runs(root: Path, endpoint: str) -> bool:
    """quick is done and its logs stored; control and b are live, 40+ steps in, each
    resumable from the store."""
    state = replay(events(root))
    quick = [r for r in state.runs if r.target == "quick"]
    live = [r for r in long_runs(root) if r.alive]
    if not (len(quick) == 1 and quick[0].state == "completed" and len(live) == 2
            and all(len(steps_logged(root, r.id)) >= 40 for r in live)):
        return False
    stored = {(e["run"], e["key"].rsplit("/", 1)[1]) for e in of(root, "store_object")
              if e["kind"] == "result"}
    if (quick[0].id, "predictions.jsonl") not in stored:  # what quick left (its records,
        return False  # its deliverable) is in the store
    return {r.id for r in live} <= resumable_in_store(endpoint, "team")


def start_mid_runs(old: Path, endpoint: str, prefix: str = "team", steps: int = 400) -> None:
    """The old box: the campaign started with the store, now in the middle of its full
    runs (each resumable from the store). The caller kills it in a `finally`."""
    plan_in(old, endpoint, prefix, steps=steps)
    start = run_cli("engine", "start", str(old / "campaign.toml"), cwd=old, env=aws_env())
    assert start.returncode == 0, start.stderr
    wait_until(lambda: mid_full_runs(old, endpoint), 180, "the middle of the full runs")


def resume(url: str, dest: Path, endpoint: str, *extra: str):
    return run_cli("resume", url, str(dest), "--lot", 'gpu = "cpu", days = 1, price_usd = 12',
                   "--option", f"endpoint_url={endpoint}", *extra, cwd=dest.parent,
                   env=aws_env(), timeout=180)


def run_as_said(command: str, fill: dict, cwd: Path):
    """A suggested command run as a shell would (its `NAME=value` prefix in the
    environment), with its placeholders filled in; `itera-tui` is this checkout's."""
    words = shlex.split(command)
    env = dict(aws_env())
    while words and "=" in words[0] and not words[0].startswith("itera-tui"):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    assert words[0] == "itera-tui", command
    return run_cli(*[fill.get(w, w) for w in words[1:]], cwd=cwd, env=env, timeout=180)


def test_the_box_dies_and_the_campaign_ends_on_a_new_box_as_it_would_have(s3, tmp_path):
    s3.make_bucket("camp")
    old, new, whole = tmp_path / "old", tmp_path / "new", tmp_path / "whole"
    try:
        # 800 steps (40 s a run): on a loaded box the look at the store that says "the
        # middle of the runs" took long enough for 400 to end before the kill, and a run
        # continued from its last step has nothing left to log
        start_mid_runs(old, s3.endpoint, steps=LONG)
        kill_box(old)  # the box dies: every process at once, then its disk
    finally:
        kill_box(old)
    # what the new box will see: the runs live in the store's ledger when the box died (on
    # a loaded box one may have finished between the look and the kill: it is not cut)
    _, seen = stored_view(s3.endpoint, "team")
    before = {r.id: steps_logged(old, r.id)[-1] for r in seen.runs
              if r.kind == "run" and r.target != "quick" and r.alive}
    assert before, "every full run had ended before the box died: nothing to continue"
    shutil.rmtree(old)
    new.mkdir()
    copy_scripts(new)  # the person's code, checked out on the new box; nothing else
    try:
        # its engine wrote a moment ago and never said it stopped: the old box may live
        alive = resume("s3://camp/team", new, s3.endpoint)
        assert alive.returncode == 2 and "--force" in alive.stderr, alive.stderr
        assert not (new / ".itera").exists()
        # it is gone; the URL given is the part's, as docs/away.md prints it
        done = resume("s3://camp/team/lot1", new, s3.endpoint, "--force")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "every one checked" in done.stdout
        # it concludes as an uninterrupted campaign does: its bundle built, verified here,
        # delivered to the store and verified there
        wait_until(lambda: (new / ".itera/ledger.jsonl").exists() and (
            of(new, "store_delivered") or [w for w in of(new, "wrapup_done")
                                           if not w.get("verified")]),
                   300, "the resumed campaign's wrap-up and delivery")
        shown = cli("status", str(new / "campaign.toml"), cwd=new, env=aws_env())
    finally:
        kill_box(new)
    (wrapped,) = of(new, "wrapup_done")
    assert wrapped["verified"] is True, (wrapped, (new / "outputs/bundle/report.md").read_text()
                                         if (new / "outputs/bundle/report.md").exists() else "")
    (delivered,) = of(new, "store_delivered")
    assert delivered["verified"] is True, delivered
    here = run_cli("verify", str(new / "outputs/bundle"), cwd=new, timeout=300)
    assert here.returncode == 0, here.stdout[-3000:] + here.stderr[-2000:]
    there = run_cli("verify", "s3://camp/team/lot1/bundle", cwd=new,
                    env=aws_env() | {"ITERA_STORE_ENDPOINT": s3.endpoint}, timeout=300)
    assert there.returncode == 0 and "VERIFIED at the store" in there.stdout, \
        there.stdout[-3000:] + there.stderr[-2000:]
    assert "phase done" in shown.stdout, shown.stdout
    assert "bundle at the store: s3://camp/team/lot1/bundle (verified there)" in shown.stdout
    for rid in before:  # what the cut run left is in the bundle: its records, its save
        assert (new / "outputs/bundle/runs" / rid / "metrics.jsonl").is_file(), rid
    (moved,) = of(new, "campaign_moved")
    assert sorted(moved["cut"]) == sorted(before)
    assert moved["price_usd"] == 12.0 and moved["window_hours"] == 24.0
    launched = Counter((e["target"], e["kind"], e["attempt"]) for e in of(new, "run_launched"))
    assert set(launched.values()) == {1}
    per_target = Counter(e["target"] for e in of(new, "run_launched"))
    cut_targets = {r.target for r in seen.runs if r.id in before}
    assert per_target == {"quick": 1} | {t: 1 + (t in cut_targets) for t in ("control", "b")}
    # quick never ran again; a cut run ran once more (a continuation), no other run again
    state = replay(events(new))
    lag = {}  # how long a checkpoint took to reach the store after its run wrote it
    acks = {(e["run"], e["path"]): e["t"] for e in of(new, "checkpoint_acknowledged")}
    for e in of(new, "store_object"):
        if e["kind"] != "checkpoint":
            continue
        path = e["key"].split(f"/checkpoints/{e['run']}/", 1)[1]
        if (e["run"], path) in acks:  # not its sidecar
            lag[e["run"]] = max(lag.get(e["run"], 0.0), e["t"] - acks[(e["run"], path)])
    cuts = {c.run: c for c in cut_runs(state)}
    for rid, last_step in before.items():
        cut = cuts[rid]
        follower = state.run(cut.continued_by)
        assert follower.state == "completed" and follower.resume_from is not None, (
            done.stdout, moved)
        assert steps_logged(new, follower.id)[0] == cut.checkpoint_step + 1
        # lost work: at most one checkpoint interval, plus the time a checkpoint takes to
        # be verified and stored (measured in this ledger) and the mirror's ledger push
        assert cut.lost_s <= INTERVAL_S + lag[rid] + PUSH_EVERY_S + 1.0, (cut, lag)
        assert last_step - cut.checkpoint_step >= 0
    report = (new / "outputs/bundle/report.md").read_text()
    assert "## Box moves" in report and "moved from box" in report
    assert all(rid in report for rid in before)
    status = json.loads(cli("status", "--json", str(new / "campaign.toml"),
                            cwd=new).stdout)
    assert status["budget"]["rental_usd"] == 1.0 + 12.0  # the plan's lot + the new box
    # the same campaign, never interrupted, concludes the same
    plan_in(whole, s3.endpoint, "whole", steps=LONG)
    proc = run_cli("run", "--headless", str(whole / "campaign.toml"), cwd=whole,
                   env=aws_env(), timeout=400)
    try:
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    finally:
        kill_box(whole)
    uninterrupted = json.loads(cli("status", "--json", str(whole / "campaign.toml"),
                                   cwd=whole).stdout)
    assert status["conclusion"]["text"] == uninterrupted["conclusion"]["text"]
    assert sorted(status["budget"]["accepted_configs"]) == \
        sorted(uninterrupted["budget"]["accepted_configs"])
    # quick finished on the old box: its records and deliverable came with the move
    (quick,) = [r for r in state.runs if r.target == "quick"]
    assert (new / ".itera/runs" / quick.id / "predictions.jsonl").is_file()
    assert steps_logged(new, quick.id)[-1] == 8
    assert "quick" in " ".join(map(str, status["budget"]["accepted_configs"]))


def test_a_box_announcing_its_end_leaves_checkpoints_in_the_store_and_damage_is_refused(
        s3, tmp_path):
    s3.make_bucket("camp")
    old, new = tmp_path / "old", tmp_path / "new"
    fs = s3.fs()
    try:
        start_mid_runs(old, s3.endpoint)
        runs = [r for r in long_runs(old) if r.alive]
        # a shutdown: SIGTERM to the supervisor, the engine and every run at once
        for pid in engine_pids(old, "supervise") + engine_pids(old, "engine"):
            os.kill(pid, signal.SIGTERM)
        for run in runs:
            os.killpg(run.pid, signal.SIGTERM)
        wait_until(lambda: not engine_pids(old), 120, "the engine to go")
    finally:
        kill_box(old)
    (kept,) = of(old, "box_checkpointed")
    assert sorted(kept["saved"]) == sorted(r.id for r in runs)
    part = "lot1"
    for run in runs:  # each run's own last save is the verified checkpoint in the store
        key = f"camp/team/{part}/checkpoints/{run.id}/{kept['saved'][run.id]}"
        assert fs.exists(key), key
        assert replay(events(old)).run(run.id).last_verified_checkpoint.step == \
            steps_logged(old, run.id)[-1]
    index = json.loads(fs.cat(f"camp/team/{part}/index.json"))
    assert any(o["key"].endswith(kept["saved"][runs[0].id]) for o in index["objects"])
    last_steps = {r.id: steps_logged(old, r.id)[-1] for r in runs}
    # what the engine said continues the campaign (its log, as `itera-tui` shows it)
    said = (old / ".itera/engine.log").read_text()
    (suggested,) = set(re.findall(r"continue with `([^`]*itera-tui resume [^`]*)`", said))
    shutil.rmtree(old)
    new.mkdir()
    copy_scripts(new)

    # damaged objects: named, refused, nothing started
    ckpt = f"camp/team/{part}/checkpoints/{runs[0].id}/{kept['saved'][runs[0].id]}"
    good = fs.cat(ckpt)
    fs.pipe(ckpt, good[:100] + bytes([good[100] ^ 1]) + good[101:])
    bad = resume("s3://camp/team", new, s3.endpoint)
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert kept["saved"][runs[0].id] in bad.stderr and "nothing was started" in bad.stderr
    assert not (new / ".itera").exists() and not engine_pids(new)
    fs.pipe(ckpt, good)
    (segment, *_) = sorted(fs.ls(f"camp/team/{part}/ledger"))
    whole_segment = fs.cat(segment)
    fs.pipe(segment, whole_segment[: len(whole_segment) // 2])
    bad = resume("s3://camp/team", new, s3.endpoint)
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "ledger" in bad.stderr and "nothing was started" in bad.stderr
    assert not (new / ".itera").exists() and not engine_pids(new)
    fs.pipe(segment, whole_segment)

    # whole again: the command the engine named continues each run from the checkpoint
    # the signal made, run as the person would (DIR filled in; the lot as printed)
    try:
        done = run_as_said(suggested, {"DIR": str(new)}, new.parent)
        assert done.returncode == 0, done.stdout + done.stderr
        wait_until(lambda: len([e for e in of(new, "run_launched") if e.get("resumes")]) == 2
                   and all(steps_logged(new, e["run"]) for e in of(new, "run_launched")
                           if e.get("resumes")), 120, "both runs continued")
        for e in of(new, "run_launched"):
            if e.get("resumes"):
                assert e["resume_from"] == kept["saved"][e["resumes"]]
                assert steps_logged(new, e["run"])[0] == last_steps[e["resumes"]] + 1
    finally:
        kill_box(new)


def newest_stored_steps(endpoint: str, prefix: str) -> dict[str, int]:
    """run -> the step of the newest checkpoint the store holds and its ledger names."""
    view = stored_view(endpoint, prefix)
    if view is None:
        return {}
    index, state = view
    keys = {o.key for o in index.of_kind("checkpoint")}
    return {r.id: max(v.step for v in r.verified
                      if v.ok and f"lot1/checkpoints/{r.id}/{v.path}" in keys)
            for r in state.runs if any(v.ok and f"lot1/checkpoints/{r.id}/{v.path}" in keys
                                       for v in r.verified)}


def continue_on_a_new_box(old: Path, new: Path, endpoint: str, prefix: str, cut: list[str],
                          steps: int = 1) -> list[dict]:
    """The lost box's folder deleted, the person's code checked out in `new`, and
    `resume --force` of the store there: the continuations' `run_launched`, once each run
    of `cut` is continued and has logged `steps` steps. The caller kills `new` in a
    `finally` (call it inside the `try`)."""
    shutil.rmtree(old)
    new.mkdir()
    copy_scripts(new)
    done = resume(f"s3://camp/{prefix}", new, endpoint, "--force")
    assert done.returncode == 0, done.stdout + done.stderr

    def continued() -> list[dict]:
        said = [e for e in of(new, "run_launched") if e.get("resumes")]
        return said if sorted(e["resumes"] for e in said) == sorted(cut) and all(
            len(steps_logged(new, e["run"])) >= steps for e in said) else []
    return wait_until(lambda: (new / ".itera/ledger.jsonl").exists() and continued(), 180,
                      "every cut run continued")


def test_a_sigkill_five_seconds_after_the_sigterm_leaves_a_store_resume_continues_from(
        s3, tmp_path):
    """RunPod's spot pods get SIGTERM and SIGKILL 5 s later: little time for the
    checkpoints the signal asks for. What must survive goes first: the stored ledger
    already says the box was going down, and each cut run continues on the new box from
    a checkpoint the store holds, never older than the newest stored before the signal."""
    s3.make_bucket("camp")
    old, new = tmp_path / "old", tmp_path / "new"
    plan_in(old, s3.endpoint, "pod", steps=400)
    try:
        start = run_cli("engine", "start", str(old / "campaign.toml"), cwd=old, env=aws_env())
        assert start.returncode == 0, start.stderr
        live = lambda: {r.id for r in long_runs(old) if r.alive}  # noqa: E731
        wait_until(lambda: live() and live() <= resumable_in_store(s3.endpoint, "pod"), 180,
                   "every live run resumable from the store")
        runs = [r for r in long_runs(old) if r.alive]
        floor = newest_stored_steps(s3.endpoint, "pod")
        for pid in engine_pids(old, "supervise") + engine_pids(old, "engine"):
            os.kill(pid, signal.SIGTERM)
        for run in runs:
            os.killpg(run.pid, signal.SIGTERM)
        (down,) = wait_until(lambda: of(old, "box_going_down"), 30,
                             "the engine to hear the signal")
        # the provider's 5 s (from the signal the engine recorded), then SIGKILL to all
        wait_until(lambda: time.time() >= down["t"] + 5.0, 30, "RunPod's 5 s")
    finally:
        kill_box(old)
    view = stored_view(s3.endpoint, "pod")
    assert view is not None
    index, stored_state = view
    assert stored_state.box_down is not None and \
        sorted(stored_state.box_down.runs) == sorted(r.id for r in runs), \
        "the stored ledger does not say the box was going down"
    try:
        for e in continue_on_a_new_box(old, new, s3.endpoint, "pod", [r.id for r in runs]):
            cut = e["resumes"]
            step = next(v.step for v in stored_state.run(cut).verified
                        if v.ok and v.path == e["resume_from"])
            assert step >= floor[cut], (e, floor)
            assert steps_logged(new, e["run"])[0] == step + 1
    finally:
        kill_box(new)
