"""A slow or hanging store keeps what matters and hangs nothing (issue 45 item 5).

A store that accepts and never answers (a real TCP "black hole" on 127.0.0.1 as the
S3 endpoint, or a file:// store whose filesystem blocks) is said not answering within
the request deadline and no upload waits on it for ever; when several objects wait,
each run's newest verified checkpoint goes before the runs' results and logs, and an
older checkpoint of a run still queued is replaced by its newer one; the wrap-up's
delivery to a hanging store ends, said as not delivered. In-process (threads only:
no process started); every server and gate is ended in a `finally`."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from conftest import needs
from enginekit import control_only, printer_cmd, write_plan
from enginekit import wait_for
from test_store_said_once import Clock, FlakyStore
from tui.campaign import load_plan
from tui.engine import Engine
from tui.engine.ledger.events import (CheckpointVerified, RunExited, StoreDelivered, StoreDown,
                                      StoreObject)
from tui.store import mirror as mirror_mod
from tui.store import open_store, transfer
from tui.store.deliver import deliver_bundle
from tui.store.mirror import Mirror
from tui.store.transfer import BoundedFS, StoreNotAnswering, upload_bytes


class BlackHole:
    """A TCP server on 127.0.0.1 that accepts every connection and never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.conns.append(conn)  # read nothing, answer nothing

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for conn in self.conns:
            conn.close()
        self.sock.close()


class Gate:
    """A filesystem whose every call waits until the gate opens (a store that hangs)."""

    def __init__(self, fs, opened: threading.Event):
        self._fs, self._opened = fs, opened

    def __getattr__(self, name):
        attr = getattr(self._fs, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        def call(*args, **kw):
            self._opened.wait()
            return attr(*args, **kw)
        return call


class HangingStore:
    """A real file:// store whose filesystem hangs while `hang` is set."""

    def __init__(self, inner):
        self.inner = inner
        self.hang = False
        self.opened = threading.Event()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    @property
    def fs(self):
        return Gate(self.inner.fs, self.opened) if self.hang else self.inner.fs


def setup_campaign(tmp_path, store_extra: str):
    root = tmp_path / "camp"
    root.mkdir()
    path = write_plan(root, control_only(printer_cmd()), extra=store_extra)
    plan = load_plan(path)
    clock = Clock()
    engine = Engine(plan, clock=clock, poll_interval=0.05).open()
    said: list = []
    engine.subscribe(said.append)
    return plan, engine, clock, said


@needs("s3fs")
def test_a_black_hole_store_is_said_not_answering_and_no_upload_hangs(tmp_path, monkeypatch):
    from storekit import aws_env

    for name, value in aws_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(transfer, "STALL_S", 1.0)  # the deadline, short for the test
    hole = BlackHole()
    engine = mirror = None
    try:
        endpoint = f"http://127.0.0.1:{hole.port}"
        store = open_store("s3://camp/team", {"endpoint_url": endpoint})
        # an upload alone: abandoned, said as the store not answering (not hung)
        result: list = []
        worker = threading.Thread(target=lambda: result.append(_try(
            lambda: upload_bytes(BoundedFS(store.fs), b"x" * 100, "camp/team/probe"))),
            daemon=True)
        worker.start()
        worker.join(120)
        assert result and isinstance(result[0], StoreNotAnswering), result
        # (whether it reached the hole before its deadline depends on how long the S3
        # client's own set-up takes on a busy box: the mirror's part below reaches it)

        plan, engine, clock, said = setup_campaign(tmp_path, f"""
[store]
url = "s3://camp/team"
options = {{ endpoint_url = "{endpoint}" }}
""")
        mirror = Mirror(plan, engine, clock, backoff_s=0.05, push_every_s=0.05).start()
        wait_for(lambda: mirror.status().silent_since is not None,
                 what="the mirror says the store is not answering", timeout=120)
        wait_for(lambda: hole.conns, what="the mirror reached the black hole", timeout=120)
        clock.t += 180
        text = mirror.status().text(clock.t)
        assert "store not answering for 3 min" in text, text
        downs = [ev for ev in said if isinstance(ev, StoreDown)]
        assert len(downs) == 1 and "did not answer" in downs[0].message, downs
    finally:
        if mirror is not None:
            mirror.close(drain_s=5)
        if engine is not None:
            engine.close()
        hole.close()


def _try(call):
    try:
        return call()
    except Exception as exc:
        return exc


def test_each_runs_newest_checkpoint_goes_before_results_and_logs(tmp_path, monkeypatch):
    """A slow store with a queue: the runs' newest verified checkpoints are stored
    first, an older checkpoint of a run still queued is never stored, then the exited
    run's results, then logs; while they wait, the status says what the store lacks."""
    monkeypatch.setattr(mirror_mod, "LOG_DELAY_S", 0.0)
    plan, engine, clock, said = setup_campaign(
        tmp_path, f'\n[store]\nurl = "file://{tmp_path}/store"\n')
    store = FlakyStore(open_store(f"file://{tmp_path}/store"))
    mirror = Mirror(plan, engine, clock, store=store, backoff_s=0.01, push_every_s=0.01)
    runs = mirror.state_dir / "runs"
    for run in ("a-1", "b-1", "c-1"):
        (runs / run).mkdir(parents=True)
        for name in ("stdout.log", "stderr.log", "metrics.jsonl", "params.json",
                     "exit.json"):
            (runs / run / name).write_text(f"{run} {name}\n")
    for run, step in (("a-1", 100), ("a-1", 200), ("c-1", 50)):
        (runs / run / f"ckpt-{step}.pt").write_bytes(b"w" * 1000)
    mirror.start()
    try:
        wait_for(lambda: mirror.status().stored >= 2, what="the plan and the ledger stored")
        store.down = True  # slow: everything below waits in the queue
        for ev in (CheckpointVerified(run="a-1", path="ckpt-100.pt", ok=True, step=100,
                                      t=clock()),
                   RunExited(run="b-1", exit_code=0, t=clock()),
                   CheckpointVerified(run="a-1", path="ckpt-200.pt", ok=True, step=200,
                                      t=clock()),
                   CheckpointVerified(run="c-1", path="ckpt-50.pt", ok=True, step=50,
                                      t=clock())):
            mirror._on_event(ev)  # as the engine's subscription does
        wait_for(lambda: mirror.status().lacks == (2, 2, 250), what="the queue taken")
        assert "the store lacks 2 verified checkpoints of 2 runs: a lost box would redo " \
               "250 steps" in mirror.status().text(clock()), mirror.status().text(clock())
        n = len([ev for ev in said if isinstance(ev, StoreObject)])
        store.down = False
        wait_for(lambda: mirror.status().caught_up and mirror.status().total > 8,
                 what="everything stored")
    finally:
        store.down = False
        mirror.close()
        engine.close()
    stored = [ev for ev in said if isinstance(ev, StoreObject)][n:]
    kinds = [(ev.kind, ev.key.rsplit("/", 1)[-1]) for ev in stored]
    names = [k[1] for k in kinds]
    assert "ckpt-100.pt" not in names, kinds  # replaced by the run's newer one
    assert set(names[:2]) == {"ckpt-200.pt", "ckpt-50.pt"}, kinds
    order = [{"checkpoint": 0, "result": 1, "log": 2}[kind] for kind, _ in kinds]
    assert order == sorted(order), kinds  # checkpoints, then results, then logs
    assert any(kind == "result" and ev.run == "b-1" for (kind, _), ev in zip(kinds, stored))
    assert mirror.status().lacks == (0, 0, None)


def test_the_status_says_what_the_store_lacks_while_a_request_hangs(tmp_path):
    """A store that hangs mid-request (within its deadline, transfer.STALL_S): the mirror's
    thread waits, yet the status says at once the checkpoint it lacks, and takes the
    engine's news meanwhile (a run's newer checkpoint counted), never "up to date"."""
    plan, engine, clock, said = setup_campaign(
        tmp_path, f'\n[store]\nurl = "file://{tmp_path}/store"\n')
    store = HangingStore(open_store(f"file://{tmp_path}/store"))
    mirror = Mirror(plan, engine, clock, store=store, backoff_s=0.01, push_every_s=0.01)
    runs = mirror.state_dir / "runs"
    for run, step in (("a-1", 10), ("a-1", 20), ("b-1", 5)):
        (runs / run).mkdir(parents=True, exist_ok=True)
        (runs / run / f"ckpt-{step}.pt").write_bytes(b"w" * 100)
    mirror.start()
    try:
        wait_for(lambda: mirror.status().caught_up and mirror.status().stored >= 2,
                 what="the plan and the ledger stored")
        store.hang = True  # the next request waits (well within its deadline)
        mirror._on_event(CheckpointVerified(run="a-1", path="ckpt-10.pt", ok=True, step=10,
                                            t=clock()))
        wait_for(lambda: mirror.status().lacks == (1, 1, 10), what="the hanging upload's lack said")
        for ev in (CheckpointVerified(run="a-1", path="ckpt-20.pt", ok=True, step=20, t=clock()),
                   CheckpointVerified(run="b-1", path="ckpt-5.pt", ok=True, step=5, t=clock())):
            mirror._on_event(ev)  # while the request still hangs
        wait_for(lambda: mirror.status().lacks == (2, 2, 25), what="the news taken while it hangs")
        status = mirror.status()
        assert status.silent_since is None and not status.caught_up, status
        assert "behind; the store lacks 2 verified checkpoints of 2 runs: a lost box would " \
               "redo 25 steps" in status.text(clock()), status.text(clock())
    finally:
        store.opened.set()
        mirror.close()
        engine.close()


def _bundle(root):
    bundle = root / "outputs/bundle"
    bundle.mkdir(parents=True)
    (bundle / "report.md").write_text("report\n")
    (bundle / "manifest.json").write_text(json.dumps({"files": []}))
    return bundle


def test_the_wrapups_delivery_to_a_hanging_store_ends_said_not_delivered(tmp_path,
                                                                        monkeypatch):
    from tui.session.wrapup import WrapupJob

    monkeypatch.setattr(transfer, "STALL_S", 0.5)
    plan, engine, clock, said = setup_campaign(
        tmp_path, f'\n[store]\nurl = "file://{tmp_path}/store"\n')
    store = HangingStore(open_store(f"file://{tmp_path}/store"))
    mirror = Mirror(plan, engine, clock, store=store)
    _bundle(plan.root)
    store.hang = True  # connections accepted, never answered, until the end
    job = WrapupJob(engine, 0.05, None, mirror=mirror)
    result: list = []
    worker = threading.Thread(target=lambda: result.append(job._deliver("outputs/bundle")),
                              daemon=True)
    try:
        worker.start()
        worker.join(120)  # hung for ever without a bound
        assert result, "the delivery to a hanging store did not end"
        assert result[0].startswith("delivery to the store failed: bundle not delivered: "
                                    "the store did not answer"), result
        delivered = [ev for ev in said if isinstance(ev, StoreDelivered)]
        assert len(delivered) == 1 and not delivered[0].verified
        assert delivered[0].problems[0].startswith(
            "delivery failed: bundle not delivered: the store did not answer")
    finally:
        store.opened.set()
        engine.close()


def test_a_delivery_that_does_not_end_within_its_bound_is_given_up(tmp_path):
    """A store that answers each request but too slowly for the whole to end: the
    delivery's own bound ends it (each request alone is within its deadline)."""

    class Drip:
        def __init__(self, fs):
            self._fs = fs

        def __getattr__(self, name):
            attr = getattr(self._fs, name)
            if not callable(attr) or name.startswith("_"):
                return attr

            def call(*args, **kw):
                time.sleep(0.3)
                return attr(*args, **kw)
            return call

    class DripStore(HangingStore):
        @property
        def fs(self):
            return Drip(self.inner.fs)

    store = DripStore(open_store(f"file://{tmp_path}/store"))
    bundle = _bundle(tmp_path / "camp")
    for i in range(20):
        (bundle / f"f{i}.txt").write_text(f"{i}\n")
    with pytest.raises(StoreNotAnswering, match="bundle not delivered: the store did not "
                                                "answer: the delivery did not end within"):
        deliver_bundle(store, "bundle", bundle, within_s=1.0)


def test_a_restart_queues_each_runs_newest_checkpoint_only(tmp_path):
    """After a restart the ledger's checkpoints not in the store are queued again: of
    a run's, only the newest by the ledger, even when an older name was verified again
    later (a `last.pt` rewritten in place is newer than `ckpt-2.pt`)."""
    plan, engine, clock, said = setup_campaign(
        tmp_path, f'\n[store]\nurl = "file://{tmp_path}/store"\n')
    mirror = Mirror(plan, engine, clock, store=open_store(f"file://{tmp_path}/store"))
    t = clock()
    try:
        mirror._rescan([
            CheckpointVerified(run="a-1", path="last.pt", ok=True, step=1, t=t),
            CheckpointVerified(run="a-1", path="ckpt-2.pt", ok=True, step=2, t=t + 1),
            CheckpointVerified(run="b-1", path="ckpt-5.pt", ok=True, step=5, t=t + 2),
            CheckpointVerified(run="a-1", path="last.pt", ok=True, step=3, t=t + 3)])
        queued = sorted((j.run, j.key.rsplit("/", 1)[-1], j.step) for j in mirror._waiting
                        if j.kind == "checkpoint")
        assert queued == [("a-1", "last.pt", 3), ("b-1", "ckpt-5.pt", 5)], queued
    finally:
        engine.close()
