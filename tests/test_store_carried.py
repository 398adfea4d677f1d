"""What a verified checkpoint carries to the store (issue 40, item 2): its SDK sidecar,
and its run's records and logs so far. A box killed mid-run left in the store only the
checkpoint file: on the new box it did not verify ("sidecar model.pt.json is missing"),
the resumed campaign's bundle was NOT VERIFIED, and the cut run's folder in it held
no records. In-process, against a file:// store (no process started)."""

from __future__ import annotations

from enginekit import wait_for
from test_store_said_once import flaky_mirror
from tui.engine.ledger.events import CheckpointVerified, RunExited
from tui.store import fetch_part, read_index
from tui.store.layout import ObjectKind

RUN = "control-1"
CKPT = "checkpoints/step-000010.pt"


def test_a_verified_checkpoint_travels_with_its_sidecar_and_the_run_s_records(tmp_path):
    engine, mirror, store, clock, _ = flaky_mirror(tmp_path)
    run_dir = mirror.state_dir / "runs" / RUN
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / CKPT).write_bytes(b"weights" * 100)
    (run_dir / f"{CKPT}.json").write_text('{"step": 10}')
    (run_dir / "metrics.jsonl").write_text('{"step": 10, "loss": 0.5}\n')
    (run_dir / "stdout.log").write_text("step 10 loss 0.5\n")
    mirror.start()
    try:
        mirror._on_event(CheckpointVerified(run=RUN, path=CKPT, ok=True, step=10,
                                            t=clock()))  # as the engine does
        wait_for(lambda: mirror.status().total >= 6 and mirror.status().stored
                 == mirror.status().total, what="the checkpoint and what travels with it stored")
        # the run goes on and exits: its records are stored again, whole
        (run_dir / "metrics.jsonl").write_text('{"step": 10, "loss": 0.5}\n' * 3)
        mirror._on_event(RunExited(run=RUN, exit_code=0, t=clock()))
        mirror.close()
    finally:
        mirror.close()
        engine.close()
    index = read_index(store, mirror.layout.part)
    part = mirror.layout.part
    sidecar = index.object(f"{part}/checkpoints/{RUN}/{CKPT}.json")
    assert sidecar.kind == ObjectKind.CHECKPOINT
    (records,) = [o for o in index.objects if o.source == f".itera/runs/{RUN}/metrics.jsonl"]
    assert records.kind == ObjectKind.RESULT  # its exit's copy, the whole file
    assert records.bytes == (run_dir / "metrics.jsonl").stat().st_size
    assert any(o.source == f".itera/runs/{RUN}/stdout.log" for o in index.objects)
    # a new box lays them back beside the checkpoint, as `itera-tui resume` fetches
    fetched = fetch_part(store, part, tmp_path / "new", kinds=(
        ObjectKind.PLAN, ObjectKind.CHECKPOINT, ObjectKind.LOG, ObjectKind.RESULT))
    assert not fetched.problems, fetched.problems
    back = tmp_path / "new/.itera/runs" / RUN
    assert (back / f"{CKPT}.json").read_text() == '{"step": 10}'
    assert (back / "metrics.jsonl").read_bytes() == (run_dir / "metrics.jsonl").read_bytes()


def test_records_stored_again_never_change_the_object_the_index_names(tmp_path):
    """Stored at each save, the records are rewritten in the store; a box killed between
    an upload and the index that names it left an object that no longer matched its
    index entry ("18005 bytes in the store, 14158 expected": resume refused). A new copy
    goes beside the listed one; the index then names it, and each listed object still
    holds the bytes its entry says."""
    import hashlib

    engine, mirror, store, clock, _ = flaky_mirror(tmp_path)
    run_dir = mirror.state_dir / "runs" / RUN
    (run_dir / "checkpoints").mkdir(parents=True)
    mirror.start()
    indexes = []  # each index the store held: a box killed now would leave it as the last
    try:
        for step in (10, 20, 30):
            (run_dir / f"checkpoints/step-{step:06d}.pt").write_bytes(b"w" * step)
            (run_dir / "metrics.jsonl").write_text('{"step": 1}\n' * step)
            mirror._on_event(CheckpointVerified(run=RUN, path=f"checkpoints/step-{step:06d}.pt",
                                                ok=True, step=step, t=clock()))
            wait_for(lambda: any(o.source.endswith("metrics.jsonl") and o.bytes == 12 * step
                                 for o in getattr(read_index(store, mirror.layout.part),
                                                  "objects", ())),
                     what=f"the records at step {step} stored")
            indexes.append(read_index(store, mirror.layout.part))
            records = [o for o in indexes[-1].objects if o.source.endswith("metrics.jsonl")]
            assert len(records) == 1, records  # one entry per file, the newest
        for index in indexes[-2:]:  # what the last two indexes name is what the store holds
            for o in index.objects:
                assert hashlib.sha256(store.fs.cat_file(store.path(o.key))).hexdigest() \
                    == o.sha256, o.key
    finally:
        mirror.close()
        engine.close()
