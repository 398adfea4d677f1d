"""A move never keeps half a campaign (issue 45 items 2 and 2b), in-process: a
campaign driven to its end on fake processes, its store built by its own mirror
(file://), then damaged as a box lost at the wrong moment leaves it, and resumed.

2b. A run whose results were in the bucket but not yet in `index.json` (the box died
seconds after the run ended) was kept as completed without its deliverable, and the
verdict changed. The store cannot prove it finished whole: it is run again on the new
box, said in resume's words and the ledger, and the verdict is the uninterrupted one.
2. A box lost after `wrapup_done` and before the delivery ended: `resume` refused
("already wrapped up") although no bundle was at the store. A wrap-up not delivered is
not the end: resume goes on and the new box builds and delivers the bundle again; one
delivered and verified at the store is still refused, pointing at `itera-tui fetch`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from enginekit import copy_scripts, printer_cmd, write_plan
from fakeprocs import FakeClock, FakeProcesses, drive_fake
from tui.campaign import load_plan
from tui.engine import Engine, read_ledger, replay
from tui.engine.conclusion.outcome import budget, conclude
from tui.engine.conclusion.verdict import verdict_of
from tui.engine.scheduler import phase_of
from tui.service.resume import Rental, ResumeRefused, fetch_campaign
from tui.store import open_store, read_index
from tui.store.mirror import Mirror

DELIVERABLE = "predictions.jsonl"
# b beats the control (whose accuracy drops at step 5): the verdict is "yes" only while
# b's run is accepted, which needs its deliverable
VARIANTS = "".join(f"""
[[variant]]
id = "{vid}"
category = "{cat}"
command = {printer_cmd("--steps", "8", "--sleep", "1", "--write", DELIVERABLE, *extra)}
minutes = 1
""" for vid, cat, extra in (("control", "mandatory", ("--acc-drop-at", "5")),
                            ("b", "useful", ())))
RENTAL = Rental.of('gpu = "cpu", days = 1, price_usd = 2')
NEW_BOX_T = 1_800_100_000.0  # the new box's clock: after everything the old one wrote


def finished_campaign(tmp_path: Path, wrapped: bool = False) -> tuple[Path, str]:
    """(the old box's folder, the store's URL): the campaign run to its end on fake
    processes, and everything its ledger says is due stored by its mirror (its close
    stores what still waits). `wrapped`: its wrap-up done before the store was written."""
    old = tmp_path / "old"
    old.mkdir()
    url = f"file://{tmp_path}/store"
    path = write_plan(old, VARIANTS, gpus=2, extra=f'\n[deliverables]\nfiles = '
                      f'["{DELIVERABLE}"]\n\n[store]\nurl = "{url}"\n')
    plan = load_plan(path)
    clock = FakeClock()
    drive(plan, clock)
    engine = Engine(plan, clock=clock.wall, monotonic=clock.mono, poll_interval=0.05,
                    processes=FakeProcesses(clock)).open()
    try:
        if wrapped:  # the bundle built and verified there; never delivered
            engine.record_wrapup(bundle="outputs/bundle", verified=True, failures=0)
        mirror = Mirror(plan, engine, clock.wall, push_every_s=0.01).start()
        mirror.close(60)
        assert not mirror._thread.is_alive(), mirror.status()
    finally:
        engine.close()
    return old, url


def drive(plan, clock: FakeClock) -> None:
    procs = FakeProcesses(clock)
    engine = Engine(plan, clock=clock.wall, monotonic=clock.mono, poll_interval=0.05,
                    processes=procs).open()
    try:
        drive_fake(engine, procs, clock)
    finally:
        engine.close()


def answer(root: Path) -> tuple[str, str, list]:
    """(verdict, conclusion, accepted configs) as `status` gives them."""
    from tui.session import load_campaign

    plan = load_campaign(root / "campaign.toml")
    state = replay(read_ledger(root / ".itera" / "ledger.jsonl"))
    runs = root / ".itera" / "runs"
    conclusion = conclude(plan, state, runs)
    return (verdict_of(plan, state, conclusion, runs).text, conclusion.text,
            sorted(budget(plan, state, runs).to_dict()["accepted_configs"]))


def unlist(store_dir: Path, key_end: str) -> None:
    """The object stays in the bucket; the index no longer lists it (written before it)."""
    index = store_dir / "lot1" / "index.json"
    raw = json.loads(index.read_text())
    kept = [o for o in raw["objects"] if not o["key"].endswith(key_end)]
    assert len(kept) < len(raw["objects"]), key_end
    raw["objects"] = kept
    index.write_text(json.dumps(raw))


def test_a_run_whose_deliverable_is_not_in_the_index_runs_again_and_the_verdict_holds(
        tmp_path):
    old, url = finished_campaign(tmp_path)
    whole = answer(old)
    assert whole[0].startswith("answered yes"), whole
    (b_run,) = [r.id for r in replay(read_ledger(old / ".itera/ledger.jsonl")).runs
                if r.target == "b"]
    # the mirror stores an exit's results with the seal (exit.json) last: listed, every
    # result before it went first
    keys = [o.key for o in read_index(open_store(url), "lot1").objects]
    # killed seconds after b ended: its results in the bucket, not yet in the index
    unlist(tmp_path / "store", f"results/{b_run}/{DELIVERABLE}")
    assert (tmp_path / "store/lot1/results" / b_run / DELIVERABLE).is_file()

    new = tmp_path / "new"
    resumed = fetch_campaign(url, new, {}, RENTAL, force=True)
    copy_scripts(new)
    drive(load_plan(new / "campaign.toml"), FakeClock(NEW_BOX_T))

    assert answer(new) == whole  # the uninterrupted verdict, conclusion and budget
    state = replay(read_ledger(new / ".itera/ledger.jsonl"))
    (again,) = [r for r in state.runs if r.resumes == b_run]
    assert again.state == "completed" and (new / ".itera/runs" / again.id / DELIVERABLE).is_file()
    assert state.run(b_run).state == "cut"
    assert resumed.rerun == {b_run: f"not in the store's index: {DELIVERABLE}"}
    assert b_run not in resumed.completed and resumed.cut[b_run] is None
    said = [e["message"] for e in read_ledger(new / ".itera/ledger.jsonl")
            if e["event"] == "warning" and e.get("run") == b_run]
    assert said == [f"{b_run} completed on the old box, but the store cannot prove it "
                    f"finished whole (not in the store's index: {DELIVERABLE}): it runs "
                    "again here from the start, never kept half"], said
    # the control, proven whole, never ran again
    assert [r.target for r in state.runs].count("control") == 1
    assert keys.index(f"lot1/results/{b_run}/{DELIVERABLE}") < \
        keys.index(f"lot1/results/{b_run}/exit.json")


def test_a_run_whose_exit_was_never_listed_runs_again(tmp_path):
    """The seal itself missing (the box died before the exit's last object was listed):
    what was listed before it is not taken for the whole."""
    old, url = finished_campaign(tmp_path)
    (b_run,) = [r.id for r in replay(read_ledger(old / ".itera/ledger.jsonl")).runs
                if r.target == "b"]
    unlist(tmp_path / "store", f"results/{b_run}/exit.json")
    resumed = fetch_campaign(url, tmp_path / "new", {}, RENTAL, force=True)
    assert resumed.rerun == {b_run: "not in the store's index: exit.json"}


def _bundle_at(store_dir: Path, files: dict[str, bytes]) -> None:
    bundle = store_dir / "lot1" / "bundle"
    for rel, data in files.items():
        (bundle / rel).parent.mkdir(parents=True, exist_ok=True)
        (bundle / rel).write_bytes(data)
    (bundle / "manifest.json").write_text(json.dumps({"format": 1, "runs": [], "files": [
        {"path": rel, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
         "kind": "artifact"} for rel, data in files.items()]}))


def test_a_wrapup_never_delivered_is_done_again_on_the_new_box(tmp_path):
    old, url = finished_campaign(tmp_path, wrapped=True)
    assert replay(read_ledger(old / ".itera/ledger.jsonl")).wrapup.state == "done"
    new = tmp_path / "new"
    resumed = fetch_campaign(url, new, {}, RENTAL, force=True)  # not refused
    assert resumed.undelivered.startswith("manifest.json: not in the store")
    copy_scripts(new)
    plan = load_plan(new / "campaign.toml")
    clock = FakeClock(NEW_BOX_T)
    engine = Engine(plan, clock=clock.wall, monotonic=clock.mono, poll_interval=0.05,
                    processes=FakeProcesses(clock)).open()
    try:
        state = engine.state
        # the bundle stayed on the old box: no wrap-up stands here, the campaign is
        # finished, so the engine's wrap-up (policy once) builds and delivers it again
        assert state.wrapup is None and phase_of(plan, state) == "finished"
        assert not state.running and not [r for r in state.runs if r.state == "cut"]
    finally:
        engine.close()
    said = [e["message"] for e in read_ledger(new / ".itera/ledger.jsonl")
            if e["event"] == "warning"]
    assert any("wrapped up on the old box, but its bundle is not at the store "
               "(manifest.json: not in the store" in m for m in said), said


def test_an_undelivered_wrapup_with_a_run_not_proven_whole_reruns_it_first(tmp_path):
    """The bundle built again must hold what the verdict needs: the run the store could
    not prove whole runs again before the new box's wrap-up, never after it."""
    old, url = finished_campaign(tmp_path, wrapped=True)
    whole = answer(old)
    (b_run,) = [r.id for r in replay(read_ledger(old / ".itera/ledger.jsonl")).runs
                if r.target == "b"]
    unlist(tmp_path / "store", f"results/{b_run}/{DELIVERABLE}")
    new = tmp_path / "new"
    fetch_campaign(url, new, {}, RENTAL, force=True)
    copy_scripts(new)
    plan = load_plan(new / "campaign.toml")
    clock = FakeClock(NEW_BOX_T)
    procs = FakeProcesses(clock)
    engine = Engine(plan, clock=clock.wall, monotonic=clock.mono, poll_interval=0.05,
                    processes=procs).open()
    try:
        assert engine.state.wrapup is None and phase_of(plan, engine.state) == "runs"
        drive_fake(engine, procs, clock)
        assert phase_of(plan, engine.state) == "finished"  # the wrap-up's turn now
    finally:
        engine.close()
    assert answer(new) == whole


def test_a_bundle_delivered_and_verified_at_the_store_still_refuses(tmp_path):
    old, url = finished_campaign(tmp_path, wrapped=True)
    files = {"report.md": b"# report\n", "runs/x/metrics.jsonl": b"{}\n"}
    _bundle_at(tmp_path / "store", files)
    index = tmp_path / "store/lot1/index.json"
    raw = json.loads(index.read_text())
    raw["bundle"] = {"key": "lot1/bundle", "verified": True, "files": 3, "bytes": 12,
                     "t": 1.0}
    index.write_text(json.dumps(raw))
    with pytest.raises(ResumeRefused, match=r"already wrapped up and its bundle delivered "
                       r"and verified there: `itera-tui fetch file://.*/lot1/bundle DIR`"):
        fetch_campaign(url, tmp_path / "new", {}, RENTAL, force=True)
    assert not (tmp_path / "new" / ".itera").exists()
    # one of its files gone from the store: it does not stand, the resume goes on
    (tmp_path / "store/lot1/bundle/report.md").unlink()
    resumed = fetch_campaign(url, tmp_path / "new", {}, RENTAL, force=True)
    assert resumed.undelivered == "report.md: missing at the store"


def _stored_ledger(url: str) -> bytes:
    from tui.store import StoreError, read_ledger as stored

    try:
        return stored(open_store(url), "lot1")
    except (OSError, StoreError):
        return b""  # the index rewritten while it was read: read again later


@pytest.mark.slow
def test_a_box_killed_during_the_delivery_is_resumed_to_a_bundle_verified_at_the_store(
        tmp_path):
    """Real engines: the old box's delivery cannot write (its bundle's key is a file, as
    a store refusing it), it is killed once the store's ledger holds `wrapup_done` and
    before any delivery ended; `resume` on a new box ends with the bundle verified there."""
    import shutil

    from conftest import run_cli
    from enginekit import control_only
    from servicekit import wait_until
    from test_box_move_store import kill_box

    old, new, late = tmp_path / "old", tmp_path / "new", tmp_path / "late"
    old.mkdir()
    store = tmp_path / "store"
    url = f"file://{store}"
    path = write_plan(old, control_only(printer_cmd("--steps", "5")),
                      extra=f'\n[store]\nurl = "{url}"\n')
    (store / "lot1").mkdir(parents=True)
    (store / "lot1" / "bundle").write_text("not a folder\n")  # every delivery fails
    ledger = old / ".itera" / "ledger.jsonl"
    try:
        start = run_cli("engine", "start", str(path), cwd=old)
        assert start.returncode == 0, start.stderr
        wait_until(lambda: b'"wrapup_done"' in _stored_ledger(url), 240,
                   "the wrap-up done and in the store's ledger")
        kill_box(old)  # the box is lost mid-delivery (its attempts are 5 and 10 s apart)
    finally:
        kill_box(old)
    assert b'"wrapup_done"' in ledger.read_bytes()
    assert not (store / "lot1" / "bundle").is_dir()  # nothing of the bundle reached it
    (store / "lot1" / "bundle").unlink()  # the store takes writes again
    shutil.rmtree(old)
    new.mkdir()
    copy_scripts(new)
    lot = ("--lot", 'gpu = "cpu", days = 1, price_usd = 2', "--force")
    try:
        done = run_cli("resume", url, str(new), *lot, cwd=tmp_path, timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "the campaign was wrapped up on the old box, but its bundle is not at the " \
               "store (manifest.json: not in the store" in done.stdout, done.stdout
        wait_until(lambda: b'"store_delivered"' in _stored_ledger(url), 300,
                   "the bundle built again, delivered, and said so in the store's ledger")
    finally:
        kill_box(new)
    events = read_ledger(new / ".itera/ledger.jsonl")
    (delivered,) = [e for e in events if e["event"] == "store_delivered"]
    assert delivered["verified"] is True, delivered
    there = run_cli("verify", f"{url}/lot1/bundle", cwd=tmp_path, timeout=300)
    assert there.returncode == 0 and "VERIFIED at the store" in there.stdout, \
        there.stdout[-3000:] + there.stderr[-2000:]
    # delivered and verified at the store: a later resume has nothing to do but fetch it
    try:
        again = run_cli("resume", url, str(late), *lot, cwd=tmp_path, timeout=180)
    finally:
        kill_box(late)  # (none was started, unless the refusal failed)
    assert again.returncode == 2 and "already wrapped up and its bundle delivered and " \
        "verified there: `itera-tui fetch" in again.stderr, again.stderr
