"""What must survive the box goes first (issue 43: RunPod's SIGKILL comes 5 s after its
SIGTERM). While the mirror works through a queue of checkpoints on a slow store, the
box announces its end: the ledger line that says so (and the index naming what is
stored) reaches the store before the next object starts, not after the whole queue.
In-process, against a file:// store whose checkpoint uploads wait for the test to let
each one through (no process started)."""

from __future__ import annotations

import threading

from enginekit import control_only, printer_cmd, wait_for, write_plan
from tui.campaign import load_plan
from tui.engine import Engine
from tui.engine.ledger.events import BoxGoingDown, CheckpointVerified
from tui.store import open_store
from tui.store.mirror import Mirror


class GatedStore:
    """A real file:// store whose checkpoint uploads each wait for one `let_one()`."""

    def __init__(self, inner):
        self.inner = inner
        self.gate = threading.Semaphore(0)
        self.started: list[str] = []  # checkpoint uploads begun, in order

    def __getattr__(self, name):
        return getattr(self.inner, name)

    @property
    def fs(self):
        return GatedFs(self.inner.fs, self)

    def let_one(self) -> None:
        self.gate.release()


class GatedFs:
    def __init__(self, inner, store: GatedStore):
        self._inner, self._store = inner, store

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def open(self, path, mode="rb", **kw):
        if "w" in mode and "/checkpoints/" in str(path):
            self._store.started.append(str(path))
            assert self._store.gate.acquire(timeout=60), "the test never let it through"
        return self._inner.open(path, mode, **kw)


def stored_ledger(store_dir) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(store_dir.rglob("ledger/*.jsonl")))


def test_the_box_going_down_is_in_the_store_before_the_next_queued_checkpoint(tmp_path):
    root = tmp_path / "camp"
    root.mkdir()
    store_dir = tmp_path / "store"
    path = write_plan(root, control_only(printer_cmd()),
                      extra=f'\n[store]\nurl = "file://{store_dir}"\n')
    plan = load_plan(path)
    engine = Engine(plan, poll_interval=0.05).open()
    store = GatedStore(open_store(f"file://{store_dir}"))
    # a ledger push every hour: only the box's end may bring one forward
    mirror = Mirror(plan, engine, store=store, backoff_s=0.01, push_every_s=3600.0)
    mirror.start()
    try:
        wait_for(lambda: stored_ledger(store_dir), 30, "the first ledger push", every=0.01)
        for i in (1, 2, 3):  # three runs' checkpoints (of one run, only its newest would go)
            run = f"v{i}-abc-1"
            run_dir = root / ".itera" / "runs" / run
            run_dir.mkdir(parents=True)
            (run_dir / "ckpt.pt").write_bytes(bytes([i]) * 4096)
            engine.journal.record(CheckpointVerified(run=run, path="ckpt.pt", ok=True, step=i))
        wait_for(lambda: len(store.started) == 1, 30, "the first checkpoint's upload", every=0.01)
        engine.journal.record(BoxGoingDown(signal="SIGTERM", grace_s=5.0,
                                           runs=("v1-abc-1", "v2-abc-1", "v3-abc-1")))
        store.let_one()  # the upload under way ends; two more wait
        wait_for(lambda: b'"box_going_down"' in stored_ledger(store_dir), 15,
                 "the box's end in the store before the queue drained", every=0.01)
        assert len(store.started) <= 2  # the third never began before it
        index = (store_dir / "lot1" / "index.json").read_text()
        first = store.started[0].split("/checkpoints/", 1)[1].split("/", 1)[0]
        assert f"checkpoints/{first}/ckpt.pt" in index  # it names what is already stored
    finally:
        for _ in range(3):
            store.let_one()
        mirror.close()
        engine.close()
