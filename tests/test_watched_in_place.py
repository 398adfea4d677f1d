"""A watched checkpoint its script rewrites in place (nanoGPT's `out/ckpt.pt`, saved at
every eval): the bytes acknowledged are the bytes verified, stored and bundled, and
each save that settled is its own acknowledgement (issue 40, item 0).

The engine once held such a file by a hard link, which shares its inode: the next save
rewrote the held copy, so the acknowledgement named one step and sha256 while the
object verified and stored held a later iteration; `resume` then refused the store's
copy as a digest mismatch.
"""

from __future__ import annotations

import hashlib
import time

import pytest

from test_engine_watched import rewrite_in_place, settle
from tui.campaign.held import HELD_DIR
from tui.engine.checkpoints.file_verdict import FileVerdict
from tui.engine.checkpoints.queue import VerificationQueue
from tui.engine.checkpoints.watched import CheckpointWatcher
from tui.engine.ledger.events import CheckpointVerified
from tui.engine.ledger.journal import Journal


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class ReadingClient:
    """A verifier client in-process: it reads (hashes) each path only when `answer` is
    called, as a real verifier reads a file seconds after it was queued."""

    pid = None

    def __init__(self):
        self.asked: dict[int, str] = {}
        self.done: list[FileVerdict] = []

    def submit(self, path, **_) -> int:
        self.asked[len(self.asked) + 1] = str(path)
        return len(self.asked)

    def answer(self) -> None:
        from pathlib import Path

        for vid, path in list(self.asked.items()):
            self.done.append(FileVerdict(vid, path, True, sha256=digest(Path(path))))
            del self.asked[vid]

    def poll(self):
        done, self.done = self.done, []
        return done

    def stop_if_idle(self):
        return False

    def close(self):
        pass


def verified(journal) -> list[CheckpointVerified]:
    return [e for e in journal.recent(1000) if isinstance(e, CheckpointVerified)]


def test_each_save_is_verified_from_its_own_copy_and_one_copy_is_kept(tmp_path):
    """Three saves over the same file, acknowledged while the verifier is still on the
    first: every verdict names the sha256 its acknowledgement did, and what stays held
    afterwards is the newest verified save's copy only."""
    run_dir = tmp_path / "runs" / "r1"
    (run_dir / "out").mkdir(parents=True)
    ckpt = run_dir / "out" / "ckpt.pt"
    journal = Journal(tmp_path / "ledger.jsonl", time.time)
    journal.open()
    client = ReadingClient()
    queue = VerificationQueue(journal, tmp_path / "runs", env=lambda: {},
                              client_factory=lambda: client)
    watcher = CheckpointWatcher(run_dir, ["out/ckpt.pt"], settle_s=1.0, scan_every_s=0)
    acks = []
    for n in (1, 2, 3):
        if n == 1:
            ckpt.write_bytes(b"iter 100 " * 50)
        else:
            rewrite_in_place(ckpt, f"iter {n}00 ".encode() * 50)
        settle(watcher, 10.0 * n)
        (ack,) = settle(watcher, 10.0 * n + 1)
        acks.append(ack)
        queue.submit("r1", ack["path"], ack["held"], sha256=ack["sha256"], keep=True)
        queue.poll()  # the first starts; the next waits behind it
    client.answer()  # the first verdict arrives after the third save
    queue.poll()
    client.answer()
    queue.poll()
    assert len({a["sha256"] for a in acks}) == 3
    verdicts = verified(journal)
    # the first save verified; the second was still waiting when the third came (only the
    # newest waiting save is worth verifying), the third verified
    assert [(v.ok, v.sha256) for v in verdicts] == [(True, acks[0]["sha256"]),
                                                   (True, acks[2]["sha256"])]
    assert [v.held for v in verdicts] == [acks[0]["held"], acks[2]["held"]]
    held = sorted(p.relative_to(run_dir).as_posix() for p in (run_dir / HELD_DIR).rglob("*")
                  if p.is_file())
    assert held == [acks[2]["held"]]  # one copy kept: the newest verified save
    rewrite_in_place(ckpt, b"iter 400 " * 50)  # a later save changes nothing held
    assert digest(run_dir / acks[2]["held"]) == acks[2]["sha256"]


def test_a_verifier_reading_other_bytes_than_acknowledged_is_a_digest_mismatch(tmp_path):
    """Not held (a copy that could not be made), rewritten before the verifier read it:
    the verdict is FAILED, naming both digests, never a verification of the ack."""
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "ckpt.pt").write_bytes(b"acknowledged")
    said = digest(run_dir / "ckpt.pt")
    journal = Journal(tmp_path / "ledger.jsonl", time.time)
    journal.open()
    client = ReadingClient()
    queue = VerificationQueue(journal, tmp_path / "runs", env=lambda: {},
                              client_factory=lambda: client)
    queue.submit("r1", "ckpt.pt", None, sha256=said, keep=True)
    queue.poll()
    (run_dir / "ckpt.pt").write_bytes(b"a later save")
    client.answer()
    queue.poll()
    (verdict,) = verified(journal)
    assert not verdict.ok and verdict.sha256 == digest(run_dir / "ckpt.pt")
    assert verdict.problem.startswith("digest mismatch") and said[:12] in verdict.problem


def test_a_verdict_gives_its_step_to_the_save_it_read_not_to_every_save_of_the_file():
    from test_engine_watched_step import LAUNCH, RUN
    from tui.app.rows import verification_mark
    from tui.engine.ledger.events import field_names
    from tui.engine.ledger.state import replay

    launch = {"seq": 1, "t": 1.7e9, "event": "run_launched", "run": RUN}
    launch |= {k: v for k, v in LAUNCH.items() if k in field_names("run_launched")}
    events = [launch]
    for seq, sha in ((2, "a" * 64), (3, "b" * 64), (4, "c" * 64)):
        events.append({"seq": seq, "t": 1.7e9 + seq, "event": "checkpoint_acknowledged",
                       "run": RUN, "path": "out/ckpt.pt", "step": None, "mode": "watched",
                       "sha256": sha, "held": f".itera-held/w-{seq}/ckpt.pt"})
    events += [{"seq": 5, "t": 1.7e9 + 5, "event": "checkpoint_verified", "run": RUN,
                "path": "out/ckpt.pt", "ok": True, "step": 50, "sha256": "a" * 64},
               {"seq": 6, "t": 1.7e9 + 6, "event": "checkpoint_verified", "run": RUN,
                "path": "out/ckpt.pt", "ok": True, "step": 150, "sha256": "c" * 64,
                "held": ".itera-held/w-4/ckpt.pt"}]
    run = replay(events).run(RUN)
    assert [c.step for c in run.checkpoints] == [50, None, 150]
    assert [verification_mark(run, c) for c in run.checkpoints] == ["✓", "↷", "✓"]
    assert run.last_verified_checkpoint.held == ".itera-held/w-4/ckpt.pt"


@pytest.mark.slow
def test_nanogpt_saving_in_place_every_few_seconds_keeps_what_was_acknowledged(tmp_path):
    """nanoGPT's loop (tests/scripts/nanogpt_ckpt.py) saves out/ckpt.pt in place every
    50 iterations, a save every few seconds: one acknowledgement per save, each with its
    own digest and iteration; every verdict reads the bytes its acknowledgement named;
    the copy kept and the bundled checkpoint are the last verified save's bytes."""
    pytest.importorskip("torch")
    from enginekit import drive
    from test_engine_watched_step import bundled, nanogpt_campaign
    from tui.campaign import load_plan
    from tui.engine.ledger.file import read_ledger

    path = nanogpt_campaign(tmp_path / "camp", "--eval_interval=50 --sleep=0.05 --max_iters=200")
    plan = load_plan(path)
    engine = drive(path, timeout=300, verifications=True)
    (run,) = engine.state.runs
    run_dir = plan.state_dir / "runs" / run.id
    events = list(read_ledger(plan.state_dir / "ledger.jsonl"))
    acks = [e for e in events if e["event"] == "checkpoint_acknowledged"]
    verdicts = [e for e in events if e["event"] == "checkpoint_verified"]
    saves = (run_dir / "stdout.log").read_text().count("saving checkpoint to")
    assert saves == 4  # iterations 50, 100, 150 and 200
    assert len(acks) == saves and len({a["sha256"] for a in acks}) == saves
    said = {a["sha256"] for a in acks}
    assert verdicts and all(v["ok"] and v.get("sha256") in said for v in verdicts), verdicts
    assert verdicts[-1]["sha256"] == acks[-1]["sha256"] and verdicts[-1]["step"] == 200
    for v in verdicts:  # each verified save takes the iteration it holds, no other save
        assert [c.step for c in run.checkpoints if c.sha256 == v["sha256"]] == [v["step"]]
    steps = [c.step for c in run.checkpoints if c.step is not None]
    assert steps[-1] == 200 and len(set(steps)) == len(steps)
    assert all(run.verdict_of(c) or run.saved_over(c) for c in run.checkpoints)
    kept = [p for p in (run_dir / HELD_DIR).rglob("*") if p.is_file()]
    assert [p.relative_to(run_dir).as_posix() for p in kept] == [verdicts[-1]["held"]]
    assert digest(kept[0]) == acks[-1]["sha256"]
    files = bundled(tmp_path, plan, run, run_dir)
    assert files.checkpoint == f"runs/{run.id}/out/ckpt.pt" and files.checkpoint_step == 200
    assert digest(tmp_path / "bundle" / files.checkpoint) == acks[-1]["sha256"]


def test_the_store_gets_the_verified_copy_not_the_file_saved_over_since(tmp_path):
    """The mirror stores a verified checkpoint from the copy the verifier read; of two
    verdicts of the same file waiting, the newer save's copy (the older one may be gone)."""
    from enginekit import wait_for
    from test_store_said_once import flaky_mirror
    from tui.store.layout import ObjectKind

    engine, mirror, store, clock, _ = flaky_mirror(tmp_path)
    run = "control-1"
    run_dir = mirror.state_dir / "runs" / run
    (run_dir / "out").mkdir(parents=True)
    (run_dir / "out" / "ckpt.pt").write_bytes(b"iter 300, saved since")
    (run_dir / HELD_DIR / "w-2").mkdir(parents=True)
    (run_dir / HELD_DIR / "w-2" / "ckpt.pt").write_bytes(b"iter 200, verified")
    for n, step in ((1, 100), (2, 200)):  # the first one's copy already let go
        mirror._on_event(CheckpointVerified(run=run, path="out/ckpt.pt", ok=True, step=step,
                                            held=f"{HELD_DIR}/w-{n}/ckpt.pt", t=clock()))
    mirror.start()
    try:
        wait_for(lambda: any(o.kind == ObjectKind.CHECKPOINT for o in mirror._index.objects),
                 what="the checkpoint stored")
    finally:
        mirror.close()
        engine.close()
    key = mirror.layout.checkpoint(run, "out/ckpt.pt")
    assert store.fs.cat_file(store.path(key)) == b"iter 200, verified"


def test_a_restarted_engine_verifies_the_newest_save_and_lets_the_older_copies_go(tmp_path):
    """Three saves acknowledged, the first verified, then the engine stopped: the next one
    keeps the first's copy until the newest save verifies, never verifies the middle one
    (saved over), and drops its copy."""
    from test_engine_watched_step import LAUNCH, RUN
    from tui.engine.ledger.events import (CheckpointAcknowledged, RunLaunched, field_names)

    run_dir = tmp_path / "runs" / RUN
    shas = []
    for n in (1, 2, 3):
        copy = run_dir / HELD_DIR / f"w-{n}" / "ckpt.pt"
        copy.parent.mkdir(parents=True)
        copy.write_bytes(f"save {n}".encode())
        shas.append(digest(copy))
    (run_dir / "out").mkdir()
    (run_dir / "out" / "ckpt.pt").write_bytes(b"save 4, not acknowledged yet")
    journal = Journal(tmp_path / "ledger.jsonl", time.time)
    journal.open()
    journal.record(RunLaunched(run=RUN, **{k: v for k, v in LAUNCH.items()
                                           if k in field_names("run_launched")}))
    for n, sha in enumerate(shas, 1):
        journal.record(CheckpointAcknowledged(run=RUN, path="out/ckpt.pt", sha256=sha,
                                              mode="watched", held=f"{HELD_DIR}/w-{n}/ckpt.pt"))
        if n == 1:
            journal.record(CheckpointVerified(run=RUN, path="out/ckpt.pt", ok=True, step=10,
                                              sha256=sha, held=f"{HELD_DIR}/w-1/ckpt.pt"))
    client = ReadingClient()
    queue = VerificationQueue(journal, tmp_path / "runs", env=lambda: {},
                              client_factory=lambda: client)
    queue.resume_unverified()
    assert sorted(p.parent.name for p in (run_dir / HELD_DIR).glob("*/ckpt.pt")) == ["w-1", "w-3"]
    queue.poll()
    client.answer()
    queue.poll()
    assert [(v.sha256, v.held) for v in verified(journal)][1:] == [
        (shas[2], f"{HELD_DIR}/w-3/ckpt.pt")]
    assert [p.parent.name for p in (run_dir / HELD_DIR).glob("*/ckpt.pt")] == ["w-3"]


def test_a_continuation_on_the_same_box_resumes_from_the_verified_copy(tmp_path):
    """A cut run whose script rewrote out/ckpt.pt in place (the box may have gone in the
    middle of a save): ITERA_RESUME names the engine's verified copy, not the file."""
    from enginekit import control_only, printer_cmd, write_plan
    from test_engine_watched_step import LAUNCH, RUN
    from tui.campaign import load_plan
    from tui.engine.ledger.events import RunLaunched, field_names
    from tui.engine.runs.launching import Launcher, Placement
    from tui.engine.scheduler import Continuation, Intent

    plan = load_plan(write_plan(tmp_path, control_only(printer_cmd())))
    runs_dir = tmp_path / "runs"
    copy = runs_dir / RUN / HELD_DIR / "w-1" / "ckpt.pt"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(b"iter 200, verified")
    (runs_dir / RUN / "out").mkdir()
    (runs_dir / RUN / "out" / "ckpt.pt").write_bytes(b"iter 250, half writ")
    journal = Journal(tmp_path / "ledger.jsonl", time.time)
    journal.open()
    journal.record(RunLaunched(run=RUN, **{k: v for k, v in LAUNCH.items()
                                           if k in field_names("run_launched")}))
    journal.record(CheckpointVerified(run=RUN, path="out/ckpt.pt", ok=True, step=200,
                                      sha256=digest(copy), held=f"{HELD_DIR}/w-1/ckpt.pt"))
    intent = Intent("control", "run", "mandatory", ("python",), 0, None,
                    resumes=Continuation(RUN, "out/ckpt.pt", "its box went away"))
    env = Launcher(plan, journal, runs_dir)._env("control-x-2", runs_dir / "control-x-2",
                                                  intent, Placement(None, (), ""))
    assert env["ITERA_RESUME"] == str(copy)
    copy.unlink()  # no copy kept (an SDK checkpoint): the file where it lies
    env = Launcher(plan, journal, runs_dir)._env("control-x-2", runs_dir / "control-x-2",
                                                  intent, Placement(None, (), ""))
    assert env["ITERA_RESUME"] == str(runs_dir / RUN / "out" / "ckpt.pt")
