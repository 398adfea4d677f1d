"""The store's core against a real S3 API (moto's server on 127.0.0.1) and a local
folder: URLs and options, streamed uploads checked by hash, the ledger as byte
ranges re-assembled and checked against the index, a part fetched back."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from conftest import needs
from storekit import s3  # noqa: F401  (the fixture)
from tui.campaign.loading.sections import secret_options
from tui.store import (Layout, ObjectKind, StoreError, StoreIndex, StoredObject, fetch_part,
                       list_parts, open_store, read_index, read_ledger, upload_bytes,
                       upload_file)

pytestmark = needs("s3fs", "moto")


def test_secret_looking_options_are_refused():
    assert secret_options({"endpoint_url": "http://h", "profile": "p", "region_name": "x",
                           "client_keys": ["~/.ssh/id"]}) == []
    assert secret_options({"key": "a", "secret": "b", "client_kwargs": {
        "aws_session_token": "t"}, "endpoint_url": "http://u:pw@h"}) == [
        "options.client_kwargs.aws_session_token", "options.endpoint_url", "options.key",
        "options.secret"]
    with pytest.raises(StoreError, match="may hold secrets"):
        open_store("s3://b/p", {"password": "x"})


def _push_ledger(store, layout, text: bytes, cut: int) -> StoreIndex:
    fs = store.fs
    upload_bytes(fs, text[:cut], store.path(layout.ledger_segment(0, cut)))
    upload_bytes(fs, text[cut:], store.path(layout.ledger_segment(cut, len(text))))
    index = StoreIndex(layout.part, len(text), hashlib.sha256(text).hexdigest())
    upload_bytes(fs, index.to_json().encode(), store.path(layout.index))
    return index


@pytest.mark.slow
def test_ledger_ranges_and_checkpoint_round_trip_through_s3(s3, tmp_path):  # noqa: F811
    bucket = s3.make_bucket("camp")
    store = open_store(f"{bucket}/team/c1", s3.options())
    layout = Layout("lot1")
    ledger = b"".join(b'{"seq": %d}\n' % i for i in range(1, 200))
    index = _push_ledger(store, layout, ledger, 1000)
    ckpt = tmp_path / "ck.bin"
    ckpt.write_bytes(bytes(range(256)) * 40000)  # ~10 MB: more than one chunk
    moved = upload_file(store.fs, ckpt, store.path(layout.checkpoint("r1", "ck.bin")))
    assert moved.sha256 == hashlib.sha256(ckpt.read_bytes()).hexdigest()
    index = index.with_object(StoredObject(layout.checkpoint("r1", "ck.bin"), moved.bytes,
                                           moved.sha256, ObjectKind.CHECKPOINT, "r1",
                                           ".itera/runs/r1/ck.bin"))
    upload_bytes(store.fs, index.to_json().encode(), store.path(layout.index))

    # an HF checkpoint folder: its files, then its manifest (tui/store/folders.py)
    from tui.campaign.files import sha256_tree
    from tui.store.folders import upload_folder

    folder = tmp_path / "checkpoint-7"
    (folder / "sub").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 50000)  # > one chunk
    (folder / "sub" / "trainer_state.json").write_text('{"global_step": 7}')
    fkey = layout.checkpoint("r1", "out/checkpoint-7")
    stored = upload_folder(store.fs, folder, store.path(fkey))
    assert (stored.sha256, stored.bytes) == sha256_tree(folder) and stored.files == 2
    index = index.with_object(StoredObject(fkey, stored.bytes, stored.sha256,
                                           ObjectKind.CHECKPOINT, "r1",
                                           ".itera/runs/r1/out/checkpoint-7", 0.0, stored.files))
    upload_bytes(store.fs, index.to_json().encode(), store.path(layout.index))

    assert list_parts(store) == ["lot1"]
    assert read_ledger(store, "lot1") == ledger
    dest = tmp_path / "back"
    got = fetch_part(store, "lot1", dest)
    assert got.problems == ()
    assert (dest / ".itera/ledger.jsonl").read_bytes() == ledger
    assert (dest / ".itera/runs/r1/ck.bin").read_bytes() == ckpt.read_bytes()
    assert sha256_tree(dest / ".itera/runs/r1/out/checkpoint-7") == sha256_tree(folder)
    (dest / ".itera/runs/r1/ck.bin").unlink()

    # a stored range altered: the ledger no longer matches the index, said in words
    store.fs.pipe(store.path(layout.ledger_segment(0, 1000)), b"x" * 1000)
    with pytest.raises(StoreError, match="sha256"):
        read_ledger(store, "lot1")
    upload_bytes(store.fs, ledger[:1000], store.path(layout.ledger_segment(0, 1000)))
    assert read_ledger(store, "lot1") == ledger
    # a checkpoint altered: not laid down under its name, and named
    store.fs.pipe(store.path(layout.checkpoint("r1", "ck.bin")), b"bad")
    got = fetch_part(store, "lot1", dest)
    assert len(got.problems) == 1 and "lot1/checkpoints/r1/ck.bin" in got.problems[0]
    assert not (dest / ".itera/runs/r1/ck.bin").exists()


def test_local_folder_store_renames_only_whole_files(tmp_path):
    store = open_store(f"file://{tmp_path}/store")
    layout = Layout("lot1")
    ledger = b'{"seq": 1}\n{"seq": 2}\n'
    _push_ledger(store, layout, ledger, 11)
    assert read_ledger(store, "lot1") == ledger
    assert read_index(store, "lot1").ledger_bytes == len(ledger)
    assert not list((tmp_path / "store").rglob("*.part"))
    (tmp_path / "store/lot1/ledger" / f"{11:014d}-{len(ledger):014d}.jsonl").unlink()
    with pytest.raises(StoreError, match="bytes"):
        read_ledger(store, "lot1")


def test_check_refuses_a_secret_in_store_options_and_names_the_key(tmp_path):
    from clikit import cli
    from enginekit import printer_cmd, write_plan

    path = write_plan(tmp_path, f"""
[[variant]]
id = "control"
category = "mandatory"
command = {printer_cmd("--steps", "5")}
minutes = 1
""", extra="""
[store]
url = "s3://bucket/prefix"
options = { endpoint_url = "http://127.0.0.1:9", secret = "hunter2", client_kwargs = { aws_session_token = "t0k" } }
""")
    out = cli("check", str(path), cwd=tmp_path)
    assert out.returncode == 2
    assert "store.options.secret: may hold a secret" in out.stderr
    assert "store.options.client_kwargs.aws_session_token: may hold a secret" in out.stderr
    assert "hunter2" not in out.stderr + out.stdout
    path.write_text(path.read_text().replace(', secret = "hunter2", client_kwargs = { '
                                             'aws_session_token = "t0k" }', ''))
    # nothing answers on 127.0.0.1:9: the plan is checked as it would start without it
    ok = cli("check", "--without-store", str(path), cwd=tmp_path)
    assert ok.returncode in (0, 1), ok.stderr
    assert "store: s3://bucket/prefix (options: endpoint_url)" in ok.stdout
    path.write_text(path.read_text().replace('s3://bucket/prefix', 'sftp://me:pw@host/x'))
    bad = cli("check", str(path), cwd=tmp_path)
    assert bad.returncode == 2 and 'store.url: "sftp://host/x" carries a password' in bad.stderr
    assert "pw" not in bad.stderr.replace("password", "")


def test_a_local_folder_store_across_an_engine_restart_with_ranges_joined(tmp_path,
                                                                           monkeypatch):
    """file:// store: the second engine goes on from what the first stored (no range
    sent twice, the same index), and many ranges are joined into one, still checked.
    The run is the engine's fake one (tests/fakeprocs.py): it lives on between the two."""
    import time

    from enginekit import printer_cmd, write_plan
    from fakeprocs import SelfPlayingProcesses
    from tui.campaign import load_plan
    from tui.engine import Engine
    from tui.session import CampaignSession
    from tui.engine import read_ledger as read_ledger_file
    from tui.store import ledger_segments, mirror

    monkeypatch.setattr(mirror, "COMPACT_AFTER", 4)
    monkeypatch.setattr(mirror, "LOG_DELAY_S", 0.2)  # a run's logs: not 5 s after its exit
    root = tmp_path / "camp"
    root.mkdir()
    path = write_plan(root, f"""
[[variant]]
id = "control"
category = "mandatory"
command = {printer_cmd("--steps", "40", "--sleep", "0.05")}
minutes = 1
""", extra=f'\n[store]\nurl = "file://{tmp_path}/store"\n')
    plan = load_plan(path)
    procs = SelfPlayingProcesses()

    def drive(until):
        session = CampaignSession(plan, Engine(plan, poll_interval=0.05, processes=procs),
                                  poll_interval=0.05)
        session.open()
        session._mirror.push_every_s = 0.2
        try:
            deadline = time.monotonic() + 60
            while not until(session):
                assert time.monotonic() < deadline
                session.step()
                time.sleep(0.05)
            assert session.mirror.wait_caught_up(20)
        finally:
            session.close()

    def mid_run(session) -> bool:
        """The first engine stops mid-run, and the run is held there until the next
        engine is open: a busy box's slow close must not let it end in between."""
        if session.engine.state.running:
            procs.runs[-1].hold()
            return True
        return False

    def finished(session) -> bool:
        procs.runs[-1].release()
        return session.engine.finished

    drive(mid_run)
    store = open_store(f"file://{tmp_path}/store")
    first = read_index(store, "lot1")
    assert first.ledger_bytes > 0
    first_range = ledger_segments(store, "lot1")[0][:2]
    drive(finished)  # the next one reattaches and finishes
    index = read_index(store, "lot1")
    local = (root / ".itera/ledger.jsonl").read_bytes()
    assert local.startswith(read_ledger(store, "lot1")) and index.ledger_bytes > first.ledger_bytes
    ranges = [seg[:2] for seg in ledger_segments(store, "lot1")]
    assert ranges[0][0] == 0 and ranges[0][1] > first_range[1], (first_range, ranges)
    assert len(ranges) <= mirror.COMPACT_AFTER  # joined as they piled up
    plans = [o for o in index.objects if o.kind == "plan"]
    assert len(plans) == 1 and plans[0].bytes == (root / ".itera/plan.toml").stat().st_size
    logs = {o.key for o in index.of_kind("log")}
    assert any(k.endswith("stdout.log") for k in logs) and any(k.endswith("stderr.log")
                                                               for k in logs)
    assert [e["event"] for e in read_ledger_file(root / ".itera/ledger.jsonl")
            if e["event"] in ("run_launched", "run_reattached")] == ["run_launched",
                                                                    "run_reattached"]


def hostile_results(run) -> None:
    """What the run leaves (the test's hand in a fake run): its records, a real
    deliverable, a link out of its folder and a FIFO where two deliverables should be."""
    with open(run.run_dir / "metrics.jsonl", "a") as f:
        for step in range(1, 6):
            f.write(json.dumps({"step": step, "loss": 1.0 / step, "acc": 0.1 * step}) + "\n")
    (run.run_dir / "ok.txt").write_text("a real deliverable\n")
    os.symlink(run.env["SECRET_FILE"], run.run_dir / "model.bin")  # a link out of the folder
    os.mkfifo(run.run_dir / "predictions.jsonl")  # opening it to read would wait forever
    run.exit(0)


def test_an_exited_runs_results_are_stored_whole_but_never_a_link_or_a_fifo(tmp_path,
                                                                              monkeypatch):
    """What an exited run leaves for its verdict and the bundle (its records, the plan's
    [deliverables]) goes to the store whole, so a new box judges it the same; a file the
    run swapped for a link out of its folder or a FIFO is not sent (a link would send what
    it points at, a FIFO would hang the mirror), and the mirror goes on. The run is the
    engine's fake one (tests/fakeprocs.py), its files made by the test."""
    from enginekit import control_only, step_to_the_end, write_plan
    from fakeprocs import SelfPlayingProcesses
    from tui.campaign import load_plan
    from tui.engine import Engine
    from tui.session import CampaignSession
    from tui.store import mirror

    monkeypatch.setattr(mirror, "LOG_DELAY_S", 0.2)  # a run's logs: not 5 s after its exit
    secret = tmp_path / "elsewhere" / "credentials"
    secret.parent.mkdir()
    secret.write_text("itera-mirror-secret-Yb7c\n")
    monkeypatch.setenv("SECRET_FILE", str(secret))
    root = tmp_path / "camp"
    root.mkdir()
    path = write_plan(root, control_only('["python", "hostile_results.py"]'),
                      extra='\n[deliverables]\nfiles = ["ok.txt", "model.bin", '
                            f'"predictions.jsonl"]\n\n[store]\nurl = "file://{tmp_path}/store"\n')
    plan = load_plan(path)
    procs = SelfPlayingProcesses(hostile_results)
    session = CampaignSession(plan, Engine(plan, poll_interval=0.05, processes=procs),
                              poll_interval=0.05)
    session.open()
    session._mirror.push_every_s = 0.2
    try:
        step_to_the_end(session)
        assert session.mirror.wait_caught_up(60), session.mirror.status()
    finally:
        session.close()
    store = open_store(f"file://{tmp_path}/store")
    index = read_index(store, "lot1")
    results = {o.key.rsplit("/", 1)[1]: o for o in index.of_kind("result")}
    assert {"metrics.jsonl", "ok.txt", "params.json", "exit.json"} <= set(results), results
    assert not {"model.bin", "predictions.jsonl"} & set(results), sorted(results)
    run_dir = next((root / ".itera/runs").iterdir())
    assert store.fs.cat(store.path(results["metrics.jsonl"].key)) == \
        (run_dir / "metrics.jsonl").read_bytes()
    for file in (tmp_path / "store").rglob("*"):
        if file.is_file():
            assert b"itera-mirror-secret" not in file.read_bytes(), file


def test_the_mirror_keeps_every_raw_file_the_bundle_copies():
    """A finished run's files the bundle copies are the ones the store keeps for a new
    box (two lists, since the mirror does not import the bundle package)."""
    from tui.bundle.runfiles import RAW
    from tui.store.mirror import RUN_RESULTS

    assert set(RUN_RESULTS) == {name for name in RAW if not name.endswith(".log")}


def test_an_sdk_deliverable_goes_to_the_store_with_its_sidecar_before_the_seal(tmp_path):
    """A deliverable the SDK saved (the demo's model.pt) reloads on the next box only
    with its sidecar (model.pt.json): the exit stores both, the sidecar before the seal
    (exit.json), so a run the store proves whole has it. Without it, a resumed demo's
    bundle was NOT VERIFIED: 'sidecar model.pt.json is not beside model.pt'."""
    from types import SimpleNamespace

    from enginekit import printer_cmd, write_plan, control_only
    from tui.campaign import load_plan
    from tui.engine.ledger.events import RunExited
    from tui.store.mirror import Mirror

    root = tmp_path / "camp"
    root.mkdir()
    path = write_plan(root, control_only(printer_cmd("--steps", "3")), extra=(
        '\n[deliverables]\nfiles = ["model.pt", "predictions.jsonl"]\n\n'
        f'[store]\nurl = "file://{tmp_path}/store"\n'))
    plan = load_plan(path)
    run_dir = plan.state_dir / "runs" / "control-1"
    run_dir.mkdir(parents=True)
    for name in ("model.pt", "model.pt.json", "predictions.jsonl", "exit.json"):
        (run_dir / name).write_text("{}")
    mirror = Mirror(plan, SimpleNamespace(share=None), store=open_store(plan.store))
    keys = [job.key.rsplit("/", 1)[1] for job in
            mirror._jobs_of(RunExited(seq=1, t=1.0, run="control-1", exit_code=0))
            if job.kind == "result"]
    assert keys.index("model.pt") < keys.index("model.pt.json") < keys.index("exit.json")
    assert keys[-1] == "exit.json" and "predictions.jsonl.json" not in keys
