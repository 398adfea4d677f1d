"""CheckpointWatcher: user-written checkpoints found complete, hashed, acknowledged.

Pure stdlib and real files; `now` is passed in, so settling needs no sleeping
(only the hash thread is waited for)."""

import hashlib
import json
import os
import subprocess
import time

import pytest

from tui.campaign import files
from tui.campaign.files import sha256_tree
from tui.engine.checkpoints import watched
from tui.engine.checkpoints.watched import CheckpointWatcher, step_of


def settle(watcher, now, *, writer_gone=False, timeout=10.0, step_at=None):
    """Poll at `now` until no hash is in flight; return every ack."""
    acks = watcher.poll(now, writer_gone=writer_gone, step_at=step_at)
    deadline = time.time() + timeout
    while watcher.busy and time.time() < deadline:
        time.sleep(0.01)
        acks += watcher.poll(now, writer_gone=writer_gone, step_at=step_at)
    return acks


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_growing_file_is_acknowledged_once_it_stops_changing(tmp_path):
    ckpt = tmp_path / "ckpt" / "step-000120.pt"
    ckpt.parent.mkdir()
    ckpt.write_bytes(b"x" * 1000)
    watcher = CheckpointWatcher(tmp_path, ["ckpt/*.pt"], settle_s=2.0, scan_every_s=0)
    assert settle(watcher, 100.0) == []  # first sight
    with open(ckpt, "ab") as f:
        f.write(b"y" * 1000)  # still being written
    assert settle(watcher, 101.5) == []
    assert settle(watcher, 103.0) == []  # unchanged for 1.5 s only
    acks = settle(watcher, 103.6)
    held = acks[0].pop("held")  # its own copy (tui.campaign.held.copy_held)
    assert (tmp_path / held).read_bytes() == ckpt.read_bytes() and held.startswith(".itera-held/")
    assert acks == [{"t": 103.6, "step": 120, "event": "checkpoint", "path": "ckpt/step-000120.pt",
                     "sha256": sha(ckpt), "bytes": 2000, "mode": "watched"}]
    assert settle(watcher, 200.0) == []  # acknowledged once
    ckpt.write_bytes(b"z" * 10)  # overwritten (a last.ckpt): a new checkpoint
    settle(watcher, 201.0)
    assert [a["sha256"] for a in settle(watcher, 204.0)] == [sha(ckpt)]


def test_an_hf_folder_is_complete_when_its_trainer_state_parses(tmp_path):
    folder = tmp_path / "out" / "checkpoint-40"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "optimizer.pt").write_bytes(b"optimizer")
    watcher = CheckpointWatcher(tmp_path, ["out/checkpoint-*"], settle_s=60, scan_every_s=0)
    assert settle(watcher, 1.0) == []
    (folder / "trainer_state.json").write_text('{"global_step": 4')  # torn
    assert settle(watcher, 2.0) == []
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 40}))
    (ack,) = settle(watcher, 3.0)  # no settling needed
    assert ack["path"] == "out/checkpoint-40" and ack["step"] == 40
    assert (ack["sha256"], ack["bytes"]) == sha256_tree(folder)


@pytest.mark.slow
def test_tree_hash_is_the_sha256sum_listing_of_the_folder(tmp_path):
    folder = tmp_path / "checkpoint-3"
    (folder / "sub").mkdir(parents=True)
    (folder / "b.bin").write_bytes(b"bee")
    (folder / "a b.json").write_text("{}")
    (folder / "sub" / "c.pt").write_bytes(b"\x00" * 100)
    listing = subprocess.run(
        "find . -type f -printf '%P\\0' | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum",
        shell=True, cwd=folder, capture_output=True, text=True, check=True)
    assert sha256_tree(folder) == (listing.stdout.split()[0], 105)


def test_links_out_of_the_run_directory_are_refused_and_reported_once(tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    run.mkdir()
    outside.mkdir()
    (outside / "secret.ckpt").write_bytes(b"not yours")
    (run / "leak.ckpt").symlink_to(outside / "secret.ckpt")
    (run / "linked").symlink_to(outside, target_is_directory=True)
    (run / "real.ckpt").write_bytes(b"mine")
    (run / "alias.ckpt").symlink_to(run / "real.ckpt")
    watcher = CheckpointWatcher(run, ["*.ckpt", "linked/*.ckpt"], settle_s=0, scan_every_s=0)
    settle(watcher, 1.0)
    acks = settle(watcher, 2.0, writer_gone=True)
    assert [a["path"] for a in acks] == ["real.ckpt"]  # the alias is skipped, not duplicated
    problems = watcher.take_problems()
    assert len(problems) == 2 and all("outside the run directory" in p for p in problems)
    assert {p.split(":")[0] for p in problems} == {"watched checkpoint leak.ckpt",
                                                    "watched checkpoint linked/secret.ckpt"}
    settle(watcher, 3.0, writer_gone=True)
    assert watcher.take_problems() == []  # said once
    assert "/" + str(tmp_path).strip("/") not in " ".join(problems)  # no absolute paths


def test_a_folder_with_a_link_or_a_fifo_inside_is_refused(tmp_path):
    folder = tmp_path / "checkpoint-1"
    folder.mkdir()
    (folder / "trainer_state.json").write_text("{}")
    os.mkfifo(folder / "pipe")
    watcher = CheckpointWatcher(tmp_path, ["checkpoint-*"], settle_s=0, scan_every_s=0)
    assert settle(watcher, 1.0, writer_gone=True) == []
    assert "not a regular file" in watcher.take_problems()[0]


def test_vanished_and_unreadable_files_never_raise(tmp_path, monkeypatch):
    (tmp_path / "gone.pt").write_bytes(b"soon gone")
    (tmp_path / "locked.pt").write_bytes(b"locked")
    real_hash = files.sha256_file

    def hash_then_fail(path):
        if path.name == "gone.pt":
            path.unlink()
            raise FileNotFoundError(2, "No such file or directory")
        if path.name == "locked.pt":
            raise PermissionError(13, "Permission denied")
        return real_hash(path)

    def copy_then_fail(run_dir, relative, tag):
        return hash_then_fail(run_dir / relative)  # the copy reads the file first

    monkeypatch.setattr(watched, "sha256_file", hash_then_fail)
    monkeypatch.setattr(watched, "copy_held", copy_then_fail)
    watcher = CheckpointWatcher(tmp_path, ["*.pt"], settle_s=0, scan_every_s=0)
    assert settle(watcher, 1.0, writer_gone=True) == []
    assert settle(watcher, 2.0, writer_gone=True) == []  # not retried while unchanged
    assert watcher.vanished == 1 and not watcher.busy
    assert watcher.take_problems() == ["watched checkpoint locked.pt: cannot be read "
                                       "(Permission denied)"]


def test_a_file_changed_while_hashed_is_hashed_again(tmp_path, monkeypatch):
    ckpt = tmp_path / "model.pt"
    ckpt.write_bytes(b"first")
    real_hash, calls = files.sha256_file, []

    def hash_while_rewritten(path):
        digest = real_hash(path)
        calls.append(digest)
        if len(calls) == 1:
            path.write_bytes(b"second, longer")
        return digest

    monkeypatch.setattr(watched, "sha256_file", hash_while_rewritten)
    monkeypatch.setattr(watched, "copy_held", lambda *a: None)  # not held: hashed in place
    watcher = CheckpointWatcher(tmp_path, ["*.pt"], settle_s=0, scan_every_s=0)
    (ack,) = settle(watcher, 1.0, writer_gone=True)  # the stale hash was discarded
    assert len(calls) == 2
    assert ack["sha256"] == sha(ckpt) == calls[1][0] and ack["bytes"] == len(b"second, longer")


def test_a_restarted_engine_does_not_acknowledge_known_checkpoints_again(tmp_path):
    (tmp_path / "a.ckpt").write_bytes(b"aaaa")
    (tmp_path / "b.ckpt").write_bytes(b"bb")
    known = [{"path": "a.ckpt", "sha256": sha(tmp_path / "a.ckpt"), "bytes": 4}]
    watcher = CheckpointWatcher(tmp_path, ["*.ckpt"], settle_s=0, scan_every_s=0, known=known)
    assert [a["path"] for a in settle(watcher, 1.0, writer_gone=True)] == ["b.ckpt"]


def test_drain_after_exit_hashes_what_had_no_time_to_settle(tmp_path):
    (tmp_path / "last.ckpt").write_bytes(b"written just before exit")
    (tmp_path / "empty.ckpt").write_bytes(b"")
    watcher = CheckpointWatcher(tmp_path, ["*.ckpt"], settle_s=3600)
    assert [a["path"] for a in watcher.drain(5.0)] == ["last.ckpt"]  # an empty file is not one


def test_files_found_together_are_acknowledged_in_the_order_they_were_written(tmp_path):
    """A fast run saved step_50 .. step_200 before the watcher's look (issue 41 walk): by
    name step_50.pt came last, so the bundle and a resume took step 50 as the newest."""
    (tmp_path / "ckpt").mkdir()
    for i, step in enumerate((50, 100, 150, 200)):
        path = tmp_path / "ckpt" / f"step_{step}.pt"
        path.write_bytes(b"w" * (10 + step))
        os.utime(path, ns=(1_000_000_000 * (1000 + i),) * 2)
    watcher = CheckpointWatcher(tmp_path, ["ckpt/*.pt"], settle_s=60, scan_every_s=0)
    acks = watcher.drain(500.0)
    assert [a["step"] for a in acks] == [50, 100, 150, 200]


def test_scans_are_rate_limited_and_patterns_outside_are_ignored(tmp_path):
    (tmp_path / "x.pt").write_bytes(b"x")
    watcher = CheckpointWatcher(tmp_path, ["/etc/*", "../*", "*.pt"], settle_s=0,
                                scan_every_s=5.0)
    watcher.poll(0.0)
    (tmp_path / "y.pt").write_bytes(b"y")
    watcher.poll(1.0)  # no rescan yet
    assert set(watcher._seen) == {"x.pt"}


@pytest.mark.parametrize("name, step", [("checkpoint-120", 120), ("epoch=2-step=300.ckpt", 300),
                                        ("step-000040.pt", 40), ("last.ckpt", None),
                                        ("out/checkpoint-7", 7)])
def test_step_from_names(name, step):
    assert step_of(name) == step


def rewrite_in_place(path, data):
    """What nanoGPT's torch.save over out/ckpt.pt does: the same inode, truncated and
    written again (never a new file renamed over it)."""
    inode = path.stat().st_ino
    with open(path, "r+b") as f:
        f.truncate(0)
        f.write(data)
    assert path.stat().st_ino == inode


def test_a_file_rewritten_in_place_keeps_each_acknowledged_save_in_its_own_copy(tmp_path):
    """Issue 40, item 0: each save that settled is acknowledged with its own digest, and
    the copy held for it keeps those bytes whatever the script writes over the file."""
    ckpt = tmp_path / "out" / "ckpt.pt"
    ckpt.parent.mkdir()
    ckpt.write_bytes(b"save 1 " * 100)
    watcher = CheckpointWatcher(tmp_path, ["out/ckpt.pt"], settle_s=1.0, scan_every_s=0)
    acks, digests = [], []
    for n, now in ((1, 10.0), (2, 20.0), (3, 30.0)):
        if n > 1:
            rewrite_in_place(ckpt, f"save {n} ".encode() * 100)  # the same size each time
        digests.append(sha(ckpt))
        assert settle(watcher, now) == []  # first look at this save
        acks += settle(watcher, now + 1.0)  # unchanged since the last look: settled
    assert [a["sha256"] for a in acks] == digests and len(set(digests)) == 3
    rewrite_in_place(ckpt, b"save 4 " * 100)  # after the last acknowledgement
    for ack in acks:  # every held copy still holds the bytes acknowledged
        assert hashlib.sha256((tmp_path / ack["held"]).read_bytes()).hexdigest() == ack["sha256"]


def test_a_save_landing_during_the_copy_is_never_acknowledged_half_made(tmp_path, monkeypatch):
    ckpt = tmp_path / "ckpt.pt"
    ckpt.write_bytes(b"first")
    real_copy, copies = watched.copy_held, []

    def copy_while_rewritten(run_dir, relative, tag):
        copy = real_copy(run_dir, relative, tag)
        copies.append(copy)
        if len(copies) == 1:
            time.sleep(0.01)  # a later mtime on any clock resolution
            rewrite_in_place(ckpt, b"second, longer")
        return copy

    monkeypatch.setattr(watched, "copy_held", copy_while_rewritten)
    watcher = CheckpointWatcher(tmp_path, ["*.pt"], settle_s=1.0, scan_every_s=0)
    settle(watcher, 1.0)
    assert settle(watcher, 2.0) == []  # copied while a save landed: dropped, not acknowledged
    assert not (tmp_path / copies[0].path).exists()
    (ack,) = settle(watcher, 3.0)  # the new save, seen at 2.0 and unchanged since
    assert ack["sha256"] == sha(ckpt) == copies[1].sha256 and ack["bytes"] == len(b"second, longer")
    assert (tmp_path / ack["held"]).read_bytes() == b"second, longer"


def test_a_file_that_cannot_be_copied_is_hashed_where_it_lies_and_said_once(tmp_path,
                                                                             monkeypatch):
    (tmp_path / "ckpt.pt").write_bytes(b"weights")

    def disk_full(run_dir, relative, tag):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(watched, "copy_held", disk_full)
    watcher = CheckpointWatcher(tmp_path, ["*.pt"], settle_s=0, scan_every_s=0)
    (ack,) = settle(watcher, 1.0, writer_gone=True)
    assert "held" not in ack and ack["sha256"] == sha(tmp_path / "ckpt.pt")
    assert watcher.take_problems() == ["watched checkpoint ckpt.pt: could not be copied (No "
                                       "space left on device); verified where it lies"]


def test_a_restarted_engine_acknowledges_a_save_made_while_it_was_down(tmp_path):
    """nanoGPT's ckpt.pt keeps its size from save to save: a restarted engine copies and
    hashes it again, acknowledges it only if its digest is new, keeps the copies the
    ledger names and removes one a stopped engine made but never recorded."""
    from tui.campaign.held import HELD_DIR

    ckpt = tmp_path / "ckpt.pt"
    ckpt.write_bytes(b"save 1")
    kept = tmp_path / HELD_DIR / "w-kept" / "ckpt.pt"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"save 1")
    orphan = tmp_path / HELD_DIR / "w-orphan" / "ckpt.pt"
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"save 1")
    known = [{"path": "ckpt.pt", "sha256": sha(ckpt), "bytes": 6,
              "held": f"{HELD_DIR}/w-kept/ckpt.pt"}]
    watcher = CheckpointWatcher(tmp_path, ["*.pt"], settle_s=0, scan_every_s=0, known=known)
    assert not orphan.parent.exists() and kept.read_bytes() == b"save 1"
    assert settle(watcher, 1.0, writer_gone=True) == []  # the same save: not again
    assert sorted(p.name for p in (tmp_path / HELD_DIR).iterdir()) == ["w-kept"]
    rewrite_in_place(ckpt, b"save 2")  # saved while no engine watched, the same size
    watcher = CheckpointWatcher(tmp_path, ["*.pt"], settle_s=0, scan_every_s=0, known=known)
    (ack,) = settle(watcher, 2.0, writer_gone=True)
    assert ack["sha256"] == sha(ckpt) and (tmp_path / ack["held"]).read_bytes() == b"save 2"
