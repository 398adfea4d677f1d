"""The embedded demo with a `[store]` (a folder), its box lost in the full runs and the
campaign resumed on a new one (issue 40's "Must show"): `itera-tui run --headless` on
a copy of the repository's campaign.toml, killed (engine, runs, verifiers: SIGKILL,
each proven ours by this campaign's ledger or folder) once a full run's verified
checkpoint is in the store, its folder moved away; `itera-tui resume file://…` in a new
folder starts the engine there; the room opens on it while it runs; it concludes as an
uninterrupted demo does, its bundle verified here and at the store, each cut run
continued from its stored checkpoint on the very trajectory it was on.

Every process the test starts is ended by pid in a `finally` (`kill_box`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from demokit import check_demo_conclusion, copy_demo
from enginekit import wait_for
from servicekit import kill_box
from storekit import resumable_runs, stored_view
from tui.engine import read_ledger, replay
from tui.engine.lost_work import cut_runs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

PART = "demo"  # the demo's one [[lot]]: its box writes under <url>/demo/
NEW_LOT = 'gpu = "CPU demo slots", hours = 1, gpus = 2, price_usd = 0.5'


def events(root: Path) -> list[dict]:
    path = root / ".itera" / "ledger.jsonl"
    return read_ledger(path) if path.exists() else []


def of(root: Path, kind: str) -> list[dict]:
    return [e for e in events(root) if e["event"] == kind]


def losses(run_dir: Path) -> dict[int, float]:
    """step -> the training loss the run logged at it (its own metrics file)."""
    path = run_dir / "metrics.jsonl"
    rows = map(json.loads, path.read_text().splitlines()) if path.exists() else []
    return {r["step"]: r["loss"] for r in rows if "loss" in r and "event" not in r}


def cut_in_store(url: str, old: Path):
    """The full runs of control or wide live on the old box with a verified checkpoint
    in the store whose stored ledger says so (what `resume` continues from), and past
    it by a few steps (so the new box redoes steps the old one logged), or None."""
    live = {r.id for r in replay(events(old)).runs
            if r.kind == "run" and r.target in ("control", "wide") and r.alive}
    stored = {e["run"] for e in of(old, "store_object") if e["kind"] == "checkpoint"}
    if not live & stored:  # the cheap look first: the box's own ledger
        return None
    view = stored_view(url, PART)
    ready = live & resumable_runs(view, PART)
    if not ready:
        return None
    newest = {r.id: max(v.step for v in r.verified if v.ok and v.step is not None)
              for r in view[1].runs if r.id in ready}
    return {rid for rid in ready
            if max(losses(old / ".itera/runs" / rid), default=0) >= newest[rid] + 5} or None


def open_room_on(campaign: Path) -> list[str]:
    """The room, as a Textual app in this process with the headless driver, attached to
    the campaign's detached engine: what it paints once the campaign and its runs are
    drawn (and no exception), then closed (the engine goes on)."""
    from test_app_support import run, screen_lines, settle, wait_for as room_wait
    from tui.app.app import ControlRoom
    from tui.service.fleet import open_fleet
    from tui.service.starter import connect
    from tui.session import load_campaign

    plan = load_campaign(campaign)
    client = open_fleet(plan, connect(plan, start=False, name="room"))
    app = ControlRoom(plan, client, time.time, auto_wrapup=False)
    seen: list[str] = []

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app)
            await room_wait(pilot, lambda: any(r.state == "cut" for r in app.rows)
                            and any(r.state == "running" for r in app.rows), timeout=120,
                            what="the cut runs and a live continuation drawn")
            await pilot.pause()
            seen.extend(screen_lines(app))
            await pilot.press("down")
            assert app.selected_row() is not None

    try:
        run(scenario())
    finally:
        client.close()
    return seen


def test_the_demo_s_box_dies_in_its_full_runs_and_a_new_box_concludes_it_from_the_store(
        tmp_path):
    url = f"file://{tmp_path}/store"
    (tmp_path / "store").mkdir()
    old, lost, new = tmp_path / "box1", tmp_path / "lost", tmp_path / "box2"
    copy_demo(old, f'\n[store]\nurl = "{url}"\n')
    out = open(tmp_path / "box1.out", "wb")
    headless = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "run", "--headless", "--decide", "continue",
         str(old / "campaign.toml")], cwd=old, stdout=out, stderr=subprocess.STDOUT,
        env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        wait_for(lambda: headless.poll() is None and cut_in_store(url, old), 900,
                 "a full run live with a verified checkpoint in the store", every=0.5)
    finally:  # the box dies: every process at once (its runs by the ledger, its engine
        headless.kill()  # by pid and the others by this folder on their command lines)
        kill_box(old)
        headless.wait(30)
        out.close()
    # what the new box will see: the full runs live in the store's ledger when it died
    index, seen = stored_view(url, PART)
    resumable = resumable_runs((index, seen), PART)
    before = {r.id: r for r in seen.runs if r.kind == "run" and r.alive}
    continued = {rid for rid in before if rid in resumable
                 and seen.run(rid).target in ("control", "wide")}
    assert continued, (before, resumable, (tmp_path / "box1.out").read_bytes()[-3000:])
    old.rename(lost)  # its disk is gone with it
    new.mkdir()
    copy_demo(new)  # the person's checkout on the new box: the code and corpus
    (new / "campaign.toml").unlink()  # the plan comes from the store
    try:
        done = run_cli("resume", url, str(new), "--lot", NEW_LOT, "--force", cwd=tmp_path,
                       timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        wait_for(lambda: [e for e in of(new, "run_launched") if e.get("resumes")], 300,
                 "a cut run continued on the new box", every=0.5)
        painted = "\n".join(open_room_on(new / "campaign.toml"))
        wait_for(lambda: of(new, "store_delivered")
                 or [w for w in of(new, "wrapup_done") if not w.get("verified")], 900,
                 "the resumed campaign's wrap-up and delivery", every=1.0)
        shown = run_cli("status", str(new / "campaign.toml"), cwd=new)
        status = json.loads(run_cli("status", "--json", str(new / "campaign.toml"),
                                    cwd=new).stdout)
    finally:
        kill_box(new)
    # the room painted the campaign and its runs, the cut ones among them
    assert "demo: topic of the last segment" in painted, painted
    for rid in continued:
        assert f"{seen.run(rid).target}·run" in painted and "cut" in painted, painted
    # concluded as an uninterrupted campaign does: bundle built, verified here,
    # delivered to the store and verified there
    (wrapped,) = of(new, "wrapup_done")
    assert wrapped["verified"] is True, wrapped
    (delivered,) = of(new, "store_delivered")
    assert delivered["verified"] is True, delivered
    here = run_cli("verify", "outputs/bundle", cwd=new, timeout=300)
    assert here.returncode == 0, here.stdout[-3000:] + here.stderr[-2000:]
    there = run_cli("verify", f"{url}/{PART}/bundle", cwd=new, timeout=300)
    assert there.returncode == 0 and "VERIFIED at the store" in there.stdout, \
        there.stdout[-3000:] + there.stderr[-2000:]
    assert "phase done" in shown.stdout, shown.stdout
    assert f"bundle at the store: {url}/{PART}/bundle (verified there)" in shown.stdout
    # each cut run with a stored checkpoint was continued from it, not started over: the
    # continuation's first step follows the checkpoint's, and (the demo resumes bitwise)
    # every step both logged has the same loss as on the lost box
    state = replay(events(new))
    cuts = {c.run: c for c in cut_runs(state)}
    (moved,) = of(new, "campaign_moved")
    assert set(moved["cut"]) == set(before)
    finals, redone = {}, 0
    for rid in continued:
        cut = cuts[rid]
        follower = state.run(cut.continued_by)
        assert follower.state == "completed" and follower.resume_from is not None, follower
        assert cut.checkpoint_step is not None and cut.checkpoint_step > 0, cut
        mine = losses(new / ".itera/runs" / follower.id)
        assert min(mine) == cut.checkpoint_step + 1, (min(mine), cut)
        theirs = losses(lost / ".itera/runs" / rid)
        overlap = set(mine) & set(theirs)
        redone += len(overlap)
        assert all(mine[s] == theirs[s] for s in overlap), \
            [(s, mine[s], theirs[s]) for s in sorted(overlap) if mine[s] != theirs[s]][:5]
        finals[seen.run(rid).target] = new / ".itera/runs" / follower.id
        # what the cut run left is in the bundle: its records
        assert (new / "outputs/bundle/runs" / rid / "metrics.jsonl").is_file(), rid
    assert redone, "no step logged on the lost box was redone: nothing compared"
    for variant in ("control", "wide"):  # a run the move did not cut ran once, whole
        if variant not in finals:
            (run,) = [r for r in state.runs if r.target == variant and r.kind == "run"
                      and r.state == "completed"]
            finals[variant] = (new if (new / ".itera/runs" / run.id).is_dir() else lost) \
                / ".itera/runs" / run.id
    check_demo_conclusion(status, finals)
    report = (new / "outputs/bundle/report.md").read_text()
    assert "## Box moves" in report and all(rid in report for rid in continued)
