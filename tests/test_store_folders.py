"""HF checkpoint FOLDERS (`checkpoint-N/`) in the off-box store: stored file by file,
each checked, their manifest last (tui/store/folders.py); a half-stored folder is
never taken for a whole one; `resume` lays the newest whole one back and the cut run
continues from it (ITERA_RESUME names the folder laid back)."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import psutil
import pytest

from conftest import needs
from enginekit import control_only, copy_scripts, script_cmd, wait_for, write_plan
from tui.store import Layout, StoredObject, fetch_part, open_store, read_index, upload_bytes


def _folder(root: Path, step: int) -> Path:
    folder = root / "out" / f"checkpoint-{step}"
    (folder / "sub").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(os.urandom(3000))
    (folder / "sub" / "notes.txt").write_text("n" * 500)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return folder


def _index_with(store, part: str, obj: StoredObject) -> None:
    from tui.store import StoreIndex

    index = StoreIndex(part).with_object(obj)
    upload_bytes(store.fs, index.to_json().encode(), store.path(Layout(part).index))


def test_a_folder_round_trips_and_a_half_stored_one_is_never_taken(tmp_path, monkeypatch):
    from tui.store.folders import MANIFEST_SUFFIX, download_folder, manifest_key, upload_folder

    store = open_store(f"file://{tmp_path}/store")
    layout = Layout("lot1")
    run_dir = tmp_path / "run"
    folder = _folder(run_dir, 10)
    key = layout.checkpoint("r1", "out/checkpoint-10")
    moved = upload_folder(store.fs, folder, store.path(key))
    assert moved.files == 3 and moved.bytes == 3000 + 500 + len('{"global_step": 10}')
    from tui.campaign.files import sha256_tree

    assert moved.sha256 == sha256_tree(folder)[0]  # the digest its run acknowledges
    obj = StoredObject(key, moved.bytes, moved.sha256, "checkpoint", "r1",
                       ".itera/runs/r1/out/checkpoint-10", 0.0, moved.files)
    _index_with(store, "lot1", obj)
    assert read_index(store, "lot1").object(key).files == 3
    dest = tmp_path / "back"
    got = fetch_part(store, "lot1", dest)
    assert got.problems == () and ".itera/runs/r1/out/checkpoint-10" in got.files
    back = dest / ".itera/runs/r1/out/checkpoint-10"
    assert sha256_tree(back) == sha256_tree(folder)

    # a box that dies after a file and before the manifest: no manifest, no index entry
    second = _folder(run_dir, 20)
    key2 = layout.checkpoint("r1", "out/checkpoint-20")
    import tui.store.folders as folders

    real, sent = folders.upload_file, []

    def dies_on_the_second_file(fs, local, remote, **kw):
        if not remote.startswith(store.path(key2)):  # not this folder's: another thread's
            return real(fs, local, remote, **kw)
        sent.append(remote)
        if len(sent) == 2:
            raise ConnectionError("the box died")
        return real(fs, local, remote, **kw)

    monkeypatch.setattr(folders, "upload_file", dies_on_the_second_file)
    with pytest.raises(ConnectionError):
        upload_folder(store.fs, second, store.path(key2))
    monkeypatch.setattr(folders, "upload_file", real)
    assert store.fs.exists(sent[0])  # a file of it is there, and nothing says it is whole
    assert not store.fs.exists(store.path(manifest_key(key2)))
    # listed by an index all the same (damage): named, never laid back half
    _index_with(store, "lot1", StoredObject(key2, 1, "0" * 64, "checkpoint", "r1",
                                            ".itera/runs/r1/out/checkpoint-20", 0.0, 3))
    got = fetch_part(store, "lot1", tmp_path / "back2")
    assert len(got.problems) == 1 and "half-stored folder" in got.problems[0]
    assert not (tmp_path / "back2/.itera/runs/r1/out").exists()

    # a manifest naming a file outside the folder: refused, nothing written outside
    hostile = {"format": "itera-folder/1", "sha256": "0" * 64, "bytes": 1,
               "files": [{"name": "../../evil", "bytes": 1, "sha256": "0" * 64}]}
    store.fs.pipe(store.path(manifest_key(key2)), json.dumps(hostile).encode())
    with pytest.raises(ValueError, match="outside the folder"):
        download_folder(store.fs, store.path(key2), tmp_path / "x" / "checkpoint-20",
                        sha256="0" * 64, size=1)
    assert not (tmp_path / "evil").exists() and not (tmp_path / "x").exists()
    # one byte of a stored file changed: the folder is not laid back
    stored_file = tmp_path / "store" / key / "model.safetensors"
    stored_file.write_bytes(b"x" + stored_file.read_bytes()[1:])
    with pytest.raises(ValueError, match="sha256"):
        download_folder(store.fs, store.path(key), tmp_path / "y" / "checkpoint-10",
                        sha256=moved.sha256, size=moved.bytes)
    assert not (tmp_path / "y" / "checkpoint-10").exists()
    assert not list(tmp_path.rglob("*.part"))
    assert MANIFEST_SUFFIX not in os.listdir(back)  # the folder holds its files only


def _events(root: Path) -> list[dict]:
    from tui.engine import read_ledger

    return read_ledger(root / ".itera" / "ledger.jsonl")


def _stored_folders(root: Path) -> list[str]:
    return [e["key"] for e in _events(root)
            if e["event"] == "store_object" and e["kind"] == "checkpoint"]


def _end_runs(session, root: Path) -> None:
    """SIGKILL the groups of this campaign's live runs (their launcher's pid, proved ours
    by its command line naming this campaign folder): the box dies."""
    for run in session.engine.state.runs:
        if not run.alive or not run.pid:
            continue
        try:
            proc = psutil.Process(run.pid)
            if any(str(root) in part for part in proc.cmdline()):
                os.killpg(run.pid, signal.SIGKILL)
        except (psutil.Error, ProcessLookupError):
            pass


@pytest.mark.slow
@needs("torch", "safetensors")
def test_hf_checkpoint_folders_reach_the_store_and_a_new_box_continues_from_one(tmp_path):
    from tui.campaign import load_plan
    from tui.engine import Engine, replay
    from tui.service.resume import Rental, ResumeRefused, fetch_campaign
    from tui.session import CampaignSession, load_campaign

    old, new, half = tmp_path / "old", tmp_path / "new", tmp_path / "half"
    old.mkdir()
    url = f"file://{tmp_path}/store"
    path = write_plan(old, control_only(script_cmd("folder_ckpt.py", "--steps", "3000",
                                                   "--every", "10"), minutes=10),
                      extra=f'\n[store]\nurl = "{url}"\n')
    plan = load_plan(path)
    session = CampaignSession(plan, Engine(plan, poll_interval=0.05), poll_interval=0.05)
    session.open()
    try:
        def two_folders_stored():
            session.step()
            return len(_stored_folders(old)) >= 2
        wait_for(two_folders_stored, 180, "two checkpoint folders in the store")
        assert session.mirror.wait_caught_up(60), session.mirror.status()
        status = session.mirror.status()
    finally:
        _end_runs(session, old)  # the box dies: its runs first, then its engine
        session.close()
    (rid,) = {r.id for r in replay(_events(old)).runs}
    store = open_store(url)
    index = read_index(store, "lot1")
    folders = [o for o in index.of_kind("checkpoint") if getattr(o, "files", None)]
    assert len(folders) >= 2, index.objects
    from tui.store.folders import manifest_key

    for obj in folders:  # every file there, as on the box, and the folder's manifest
        local = old / obj.source
        for file in local.rglob("*"):
            if file.is_file():
                there = tmp_path / "store" / obj.key / file.relative_to(local)
                assert there.read_bytes() == file.read_bytes(), there
        assert (tmp_path / "store" / manifest_key(obj.key)).is_file()
    # the counts say the folders: every object the index lists, the ledger besides
    assert status.stored == status.total == len(index.objects) + 1

    # a half-stored newest folder (its manifest and index entry never written): a
    # resume from that store continues from the folder before it, never from it
    shutil.copytree(tmp_path / "store", tmp_path / "store-half")
    newest = max(folders, key=lambda o: int(o.key.rsplit("-", 1)[1]))
    (tmp_path / "store-half" / manifest_key(newest.key)).unlink()
    raw = json.loads((tmp_path / "store-half/lot1/index.json").read_text())
    raw["objects"] = [o for o in raw["objects"] if o["key"] != newest.key]
    (tmp_path / "store-half/lot1/index.json").write_text(json.dumps(raw))
    rental = Rental.of('gpu = "cpu", days = 1, price_usd = 2')
    taken = fetch_campaign(f"file://{tmp_path}/store-half", half, {}, rental, force=True)
    older = sorted(folders, key=lambda o: int(o.key.rsplit("-", 1)[1]))[-2]
    assert taken.cut[rid] == older.source.split(f"/{rid}/", 1)[1]
    assert not (half / newest.source).exists()

    # the whole store: the newest folder is laid back, checked, and continued from
    resumed = fetch_campaign(url, new, {}, rental, force=True)
    rel = newest.source.split(f"/{rid}/", 1)[1]
    assert resumed.cut == {rid: rel}
    from tui.campaign.files import sha256_tree

    laid = new / ".itera" / "runs" / rid / rel
    assert sha256_tree(laid) == sha256_tree(old / newest.source)
    # a folder altered at the store after it was stored: refused, named, nothing laid
    (tmp_path / "store-half" / older.key / "config.json").write_text('{"hidden": 3}')
    with pytest.raises(ResumeRefused, match="checkpoint-"):
        fetch_campaign(f"file://{tmp_path}/store-half", tmp_path / "bad", {}, rental,
                       force=True)
    assert not (tmp_path / "bad" / ".itera").exists()

    copy_scripts(new)
    plan2 = load_campaign(new / "campaign.toml")
    session = CampaignSession(plan2, Engine(plan2, poll_interval=0.05), poll_interval=0.05)
    session.open()
    try:
        def ended():
            session.step()
            return session.engine.finished
        wait_for(ended, 120, "the continued run's end")
    finally:
        _end_runs(session, new)
        session.close()
    state = replay(_events(new))
    (follower,) = [r for r in state.runs if r.resumes == rid]
    assert follower.state == "completed", follower
    given = (new / ".itera/runs" / follower.id / "resumed_from.txt").read_text()
    assert Path(given) == laid
    steps = [json.loads(line)["step"] for line in
             (new / ".itera/runs" / follower.id / "metrics.jsonl").read_text().splitlines()
             if "event" not in json.loads(line)]
    assert steps[0] == int(rel.rsplit("-", 1)[1]) + 1
