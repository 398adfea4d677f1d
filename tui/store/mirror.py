"""The mirror: the campaign copied to the store as it happens, on its own thread.

Nothing here runs on the engine's loop. The engine's only part is the ledger
subscription (`_on_event`): a `put_nowait` on a bounded queue and a wake-up,
never a wait. The thread then, in order: pushes the ledger's new bytes (whole
lines only, as one byte range `ledger/<start>-<end>.jsonl`, read back and checked
by length and sha256 before the index says so), stores each object queued (the
frozen plan at the start, each checkpoint once it verified (a file, or an HF
`checkpoint-N/` folder file by file with its manifest last: folders.py), each run's logs when
it exits, their tail bounded, and what the exited run leaves for its verdict and
the bundle: its records, params, the plan's `[deliverables]`, and its exit last,
whole: an index listing the exit lists the rest, resume's proof the run finished
whole), and rewrites `index.json` after each, so an object is in the store only
once it is whole. Each object stored is one `store_object` ledger event with its sha256.

What `resume` needs goes first (a slow store must not spend its hours on logs while
the checkpoints wait): after the ledger, the plan, then each run's newest verified
checkpoint (a newer checkpoint of a run replaces an older one still queued: `resume`
continues from the newest), then the runs' records and results, then their logs
(waiting.py: a queue once per key, n log n to catch up after an outage). Every
request has a deadline (transfer.BoundedFS): a store that accepts
and never answers is abandoned after transfer.STALL_S, said down, and the status says
"store not answering for N min"; the status also says which verified checkpoints the
store still lacks and how many steps a lost box would redo for them.

A store that fails (down, slow, refusing) is one `store_down` event (a warning
on every face, one notice), then retries with a growing pause (BACKOFF_S up to
BACKOFF_MAX_S); the runs, the rules and the ticks never wait for it. When it
answers again everything waiting goes, oldest first, and `store_up` says it is
back once it has held: answered for UP_HOLD_S and UP_HOLD_PASSES passes in a
row. A store that flaps (down 4 s in every 10) is so one `store_down` and, once
it stops flapping, one `store_up`, not a pair (and a notice) every ten seconds;
the status (`down_since`) still says at each moment whether it answers. The
mirror's state goes to the snapshot (`status()`) and to `.itera/store.json` for
`itera-tui status` and the ending. A part another campaign holds is never
written (claim.py), nor one whose ledger the ledger here does not extend (cut
shorter, or different): the store's is the record, kept, said once in a warning
with the command that continues from it (ledger_guard.py); nor, once another box
took the campaign over (lease.py), any.
"""

from __future__ import annotations

import hashlib
import queue
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ..campaign.held import HELD_DIR
from .claim import held_by_another, refusal_line
from .folders import upload_folder
from .ledger_guard import Fit, fit_bytes, kept_words
from .index import NEXT_SLOT, CampaignId, StoredObject, StoreIndex
from .lease import Superseded
from .layout import Layout, ObjectKind, inside_run, part_of, safe_key
from .status import BundleAtStore, MirrorStatus, write_status
from .waiting import RUN_CONTROLLED, Job, WaitingJobs
from . import transfer
from .transfer import (BoundedStore, LocalGone, StoreNotAnswering, hash_remote, remote_size,
                       upload_bytes, upload_file, while_waiting)
from .url import Store, open_store
from ..engine.ledger.events import (BoxGoingDown, CampaignStarted, CheckpointVerified, Event,
                                    RunExited, StoreDown, StoreObject, StoreUp, WarningEvent)

INTAKE_MAX = 10_000  # objects waiting; beyond, counted and found again by a rescan
PUSH_EVERY_S = 2.0  # the ledger's new bytes go at most this often (within seconds)
SEGMENT_MAX = 8 << 20  # one ledger range at most (a long outage: several ranges)
COMPACT_AFTER = 256  # ledger ranges before they are joined into one
LOG_MAX = 4 << 20  # of each run stream, the last this many bytes
PUBLISH_S = 1.0  # the status file and snapshot refreshed at most this often (if unchanged)
LOG_DELAY_S = 5.0  # a run's logs go this long after its exit (never in the stop burst)
BACKOFF_S = 1.0
BACKOFF_MAX_S = 30.0
UP_HOLD_S = 30.0  # a store said down is said back only once it answered this long...
UP_HOLD_PASSES = 3  # ... and this many passes in a row (a flapping store: said once)
DRAIN_S = 10.0  # what closing waits for the last ledger bytes, at most
START_PROBE_BYTES = 1 << 20  # the store timed once at the start (then by the uploads)
PROBE_AFTER_S = 10.0  # ... this long after the mirror started
# what an exited run leaves beside its logs that a new box needs: the raw files the
# bundle copies (the non-log names of tui.bundle.runfiles.RAW, kept equal by
# tests/test_store_core.py: importing the bundle package here would load some 80
# modules into the engine's start), which the conclusion also reads
RUN_RESULTS = ("params.json", "metrics.jsonl", "samples.jsonl", "exit.json")
RUN_SEAL = "exit.json"  # of an exit's results, stored last: listed, the rest went first
RUN_RECORDS = ("params.json", "metrics.jsonl", "samples.jsonl")  # a live run's, at each save
EVENTS = (CheckpointVerified, RunExited, CampaignStarted, BoxGoingDown)  # wake the mirror
# once the box announced its end (RunPod's SIGKILL comes 5 s after its SIGTERM): the
# ledger goes at once and then this often, also between two objects being stored
GOING_DOWN_PUSH_S = 0.25


def sidecar_of(rel: str) -> str:
    """The SDK's sidecar of a file it saved (`model.pt` -> `model.pt.json`: its size,
    digest and step; without it the file does not verify, nor reload, elsewhere)."""
    return f"{rel}.json"


class LedgerKept(Exception):
    """The ledger here is not an extension of the store's: nothing is written (the
    message says why and what to run)."""


class Mirror:
    """Started by the session before the engine opens, closed after the wrap-up."""

    def __init__(self, plan, engine, clock: Callable[[], float] = time.time, *,
                 store: Store | None = None, backoff_s: float = BACKOFF_S,
                 push_every_s: float = PUSH_EVERY_S, lease=None):
        self.plan = plan
        self.lease = lease  # tui.store.lease.Lease: checked before every write
        self.engine = engine
        self.clock = clock
        # every request under a deadline (a store that never answers hangs nothing)
        self.store = BoundedStore(store or open_store(plan.store))
        self.layout = Layout(part_of(plan, getattr(engine, "share", None)))
        self.root = Path(plan.root)
        self.state_dir = Path(plan.state_dir)
        self.ledger_path = self.state_dir / "ledger.jsonl"
        self.backoff_s = backoff_s
        self.push_every_s = push_every_s
        self._intake: queue.Queue = queue.Queue(maxsize=INTAKE_MAX)
        self._overflow = False
        self._waiting = WaitingJobs()
        self._wake = threading.Event()
        self._going_down = threading.Event()  # the box announced its end
        self._push_now = threading.Event()  # ... and its ledger line goes at once
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._index = StoreIndex(self.layout.part)
        self._ledger_hash = hashlib.sha256()
        self._ledger_dirty_t: float | None = None  # ledger time of the first unpushed line
        self._down_since: float | None = None
        self._silent_since: float | None = None  # a request abandoned: not answering since
        self._stored_step: dict[str, int] = {}  # of each run, its newest checkpoint stored
        self._problem: str | None = None
        self._said_down = False  # a store_down said, its store_up not yet
        self._outage_since: float | None = None  # the first failure of the outage said
        self._back_since: float | None = None  # answering again since (while said down)
        self._back_passes = 0
        self._skipped = 0
        self._kept: str | None = None  # why the store's ledger is kept over this one's
        self._kept_sha: str | None = None
        self._kept_bytes = 0  # ... and its length: said in store.json, so that the next
        # start knows the store holds more than this ledger (ledger_guard.py)
        self._bundle: BundleAtStore | None = None
        self._status = MirrorStatus(self.store.label)
        self._rate_mb_s: float | None = None  # measured: the start's probe, then uploads
        self._noted: list[dict] = []  # store_object events, written after the index
        self._published_key: tuple | None = None
        self._published_at = 0.0
        # passes of the thread begun and done (the begun count of the last one done): a
        # waiter trusts a status only from a pass begun after it asked (`wait_caught_up`)
        self._passes_begun = 0
        self._passes_done = 0
        self._waiters = 0  # wait_caught_up callers: each pass's status is published for them
        self._probe_at = time.monotonic() + PROBE_AFTER_S
        self._thread = threading.Thread(target=self._run, name="itera-store", daemon=True)

    @property
    def bundle_url(self) -> str:
        """Where the wrap-up delivers the bundle (the report names it, the delivery
        writes there): the store's URL as written, holding no secret."""
        return self.store.url.url_of(self.layout.bundle)

    # -- the engine's side: cheap, never blocking -----------------------------------
    def start(self) -> "Mirror":
        self.engine.subscribe(self._on_event)
        self._thread.start()
        return self

    def _on_event(self, ev: Event) -> None:
        if self._ledger_dirty_t is None:
            self._ledger_dirty_t = float(ev.t or self.clock())
        if isinstance(ev, BoxGoingDown):
            self._going_down.set()
            self._push_now.set()
        if isinstance(ev, EVENTS):  # only these wake the thread: the ledger's other
            try:                        # lines go with the next push (every push_every_s)
                self._intake.put_nowait(ev)
            except queue.Full:
                self._overflow = True
            self._wake.set()

    def close(self, drain_s: float = DRAIN_S) -> None:
        """Push what can go within `drain_s` (the ledger first), then end the thread."""
        self._closing.set()
        self._wake.set()
        self._thread.join(drain_s)

    # -- what the faces ask ------------------------------------------------------------
    def status(self) -> MirrorStatus:
        with self._lock:
            return self._status

    @property
    def url(self) -> str:
        return self.store.url.url_of(self.layout.part)

    # -- the thread ----------------------------------------------------------------------
    def _run(self) -> None:
        pause = self.backoff_s
        started = False
        next_push = 0.0
        while True:
            closing = self._closing.is_set()
            try:
                if not started:
                    if not self.engine.journal.opened:
                        if closing:
                            return
                        self._wake.wait(0.1)
                        continue
                    self._resume_from_store()
                    started = True
                    while_waiting(self._while_unanswered)
                self._passes_begun += 1
                begun = self._passes_begun
                self._take_intake()
                if closing or self._ledger_due(next_push):
                    self._push_now.clear()
                    self._push_ledger()
                    next_push = time.monotonic() + self._push_every()
                while (job := self._waiting.next_due(closing)) is not None:
                    self._store(job)
                    self._waiting.remove(job)
                    if job.kind == ObjectKind.RESULT and job.key.endswith("/" + RUN_SEAL):
                        self._write_index_if_noted()  # a run's results listed whole at once
                    self._take_intake()
                    if self._going_down.is_set() and self._ledger_due(next_push):
                        # what resume needs first: the ledger naming what is stored is
                        # never left behind a queue of objects when the box may go
                        self._push_now.clear()
                        self._write_index_if_noted()
                        self._push_ledger()
                        next_push = time.monotonic() + self._push_every()
                self._write_index_if_noted()  # the index after the objects it lists
                if self._silent_since is not None:  # an abandoned request may land late:
                    self._write_index()  # the index is said again once the store answers
                self._probe_if_due()
                self._answered(closing)
                if closing:  # the lines this pass wrote (store_object, store_up) go too:
                    self._push_ledger()  # else the last status says "behind" for ever
                pause = self.backoff_s
                self._publish(force=self._waiters > 0)
                self._passes_done = begun
                if closing:
                    return
                self._wake.wait(max(0.05, next_push - time.monotonic()))
                self._wake.clear()
            except Superseded as exc:  # another box holds the campaign: never written again
                self._problem, self._published_key = str(exc), None
                self._publish()
                return
            except LedgerKept as kept:  # never written over: said once, looked at again
                if self._kept is None:
                    self.engine.note(WarningEvent(message=str(kept)))
                self._kept = str(kept)
                self._publish()
                if closing:
                    return
                self._closing.wait(BACKOFF_MAX_S)
            except Exception as exc:  # the store failed: said once, retried, never raised
                self._failed(exc)
                self._publish()
                if closing:
                    return
                self._closing.wait(pause)
                pause = min(pause * 2, BACKOFF_MAX_S)

    def _while_unanswered(self) -> None:
        """Each second a store request waits (transfer.while_waiting): the engine's news
        taken (a checkpoint verified meanwhile is counted as lacking, or replaces its
        run's older one waiting) and the status said, so that a store that hangs for
        STALL_S is never shown "up to date" while it lacks what the box verified."""
        try:
            self._take_intake()
            self._publish()
        except Exception:  # never raised into the request it interrupts: said next pass
            pass

    def _ledger_due(self, next_push: float) -> bool:
        return self._push_now.is_set() or time.monotonic() >= next_push

    def _push_every(self) -> float:
        return min(self.push_every_s, GOING_DOWN_PUSH_S) if self._going_down.is_set() \
            else self.push_every_s

    def _write_index_if_noted(self) -> None:
        if self._noted:
            self._write_index()

    def _take_intake(self) -> None:
        if self._overflow:
            self._overflow = False
            self._rescan(self.engine.journal.recent(10 ** 6))
        while True:
            try:
                ev = self._intake.get_nowait()
            except queue.Empty:
                return
            for job in self._jobs_of(ev):
                self._waiting.add(job)

    def _jobs_of(self, ev: Event) -> list[Job]:
        if isinstance(ev, RunExited):
            return self._exit_jobs(ev)
        job = self._job_of(ev)
        if job is None:
            return []
        if job.kind == ObjectKind.CHECKPOINT and isinstance(ev, CheckpointVerified):
            return [job, *self._beside_checkpoint(ev)]
        return [job]

    def _beside_checkpoint(self, ev: CheckpointVerified) -> list[Job]:
        """What travels with a verified checkpoint: its SDK sidecar (size, digest, step:
        without it the file does not verify on the next box), and the run's records and
        logs so far, so a run its box kills mid-run leaves in the store what it had
        written up to its last good save (the bundle of the campaign it continues holds
        them). Its exit stores them again, whole."""
        run, t = ev.run, float(ev.t or self.clock())
        if safe_key(run) != run or "/" in run:
            return []
        jobs = []
        side = inside_run(run, sidecar_of(ev.path))
        if side is not None and (self.state_dir / "runs" / run / side).is_file():
            main = inside_run(run, ev.path)
            jobs.append(Job(ObjectKind.CHECKPOINT, f".itera/runs/{run}/{side}",
                            self.layout.checkpoint(run, side), run, t,
                            group=self.layout.checkpoint(run, main) if main else None))
        jobs += [Job(ObjectKind.LOG, f".itera/runs/{run}/{stream}.log",
                     self.layout.log(run, stream), run, t, LOG_MAX)
                 for stream in ("stdout", "stderr")]
        jobs += [Job(ObjectKind.RESULT, f".itera/runs/{run}/{name}",
                     self.layout.result(run, name), run, t)
                 for name in RUN_RECORDS if (self.state_dir / "runs" / run / name).is_file()]
        return jobs

    def _job_of(self, ev: Event) -> Job | None:
        t = float(ev.t or self.clock())
        if isinstance(ev, CampaignStarted):
            return Job(ObjectKind.PLAN, ".itera/plan.toml", self.layout.plan, None, t)
        if isinstance(ev, CheckpointVerified) and ev.ok and ev.path is not None:
            run = ev.run
            rel = inside_run(run, ev.path)
            if rel is None:
                return None
            # the engine's copy the verifier read, where it keeps one (a file rewritten in
            # place changes after its verdict): the bytes acknowledged and verified
            held = inside_run(run, ev.held) if ev.held else None
            source = held if held and held.startswith(HELD_DIR + "/") else rel
            key = self.layout.checkpoint(run, rel)
            step = int(ev.step) if isinstance(ev.step, (int, float)) else None
            return Job(ObjectKind.CHECKPOINT, f".itera/runs/{run}/{source}", key, run, t,
                       step=step, group=key)
        return None

    def _exit_jobs(self, ev: RunExited) -> list[Job]:
        """A run's exit: the tail of its two streams, and its results whole (a file it
        did not write is skipped when its turn comes). A while after the exit (exits
        come in bursts, and the last records are flushed by then)."""
        run = ev.run
        if safe_key(run) != run or "/" in run:
            return []
        t = float(ev.t or self.clock())
        after = time.monotonic() + LOG_DELAY_S
        jobs = [Job(ObjectKind.LOG, f".itera/runs/{run}/{stream}.log",
                    self.layout.log(run, stream), run, t, LOG_MAX, after)
                for stream in ("stdout", "stderr")]
        # the plan's deliverables before the seal (exit.json), the seal last: an index
        # that lists the seal lists every result the run left (resume.py's proof that a
        # run finished whole; a box killed in between leaves the run unproven: run again)
        names = [n for n in RUN_RESULTS if n != RUN_SEAL] + [
            n for n in self.plan.deliverables.files if n not in RUN_RESULTS] + [RUN_SEAL]
        for name in names:
            rel = inside_run(run, name)
            if rel is None:
                continue
            jobs.append(Job(ObjectKind.RESULT, f".itera/runs/{run}/{rel}",
                            self.layout.result(run, rel), run, t, None, after))
            # a deliverable the SDK saved (model.pt) reloads elsewhere only with its
            # sidecar: stored right after it, before the seal
            side = sidecar_of(rel)
            if name in self.plan.deliverables.files and \
                    (self.state_dir / "runs" / run / side).is_file():
                jobs.append(Job(ObjectKind.RESULT, f".itera/runs/{run}/{side}",
                                self.layout.result(run, side), run, t, None, after))
        return jobs

    def _rescan(self, events) -> None:
        """Every object the ledger says is due and the store's index lacks (at start,
        and after the intake overflowed)."""
        latest: dict[str, Job] = {}  # in ledger order; of a key, its newest
        for job in (job for ev in events for job in self._jobs_of(ev)):
            latest[job.key] = job
        have = {o.key: o for o in self._index.objects}
        # oldest first, so that of a run's checkpoints the newest stays queued (a file
        # verified again keeps its key's first place in `latest`, not its time's)
        for job in sorted(latest.values(), key=lambda j: j.t):
            stored = have.get(job.key) or have.get(job.key + NEXT_SLOT)
            if stored is not None:
                self._note_stored(job)
            if stored is None or (job.kind in RUN_CONTROLLED and self._stale(job, stored)):
                self._waiting.add(job)

    def _stale(self, job: Job, stored) -> bool:
        """A run's records or log stored at a save and grown since (an engine restarted
        between a save and the run's exit): stored again."""
        size = _size(self.root / job.source)
        return (size if job.tail is None else min(size, job.tail)) != stored.bytes

    def _resume_from_store(self) -> None:
        """What an earlier engine of this campaign already stored (after a restart):
        the index, and the ledger prefix if it is still this ledger's."""
        from .fetch import read_index
        from .url import StoreError

        _ = self.store.fs  # a store that cannot be opened: raised, retried
        self.fence()
        try:
            index = read_index(self.store, self.layout.part)
        except StoreError:
            index = None  # an index this tool cannot trust: everything stored again
        mine = CampaignId.of_state(self.engine.state)
        if held_by_another(index, mine, self.ledger_path):  # never written over: said,
            raise StoreError(refusal_line(self.store.label, self.url, index))  # retried
        if index is not None:
            prefix = _read_prefix(self.ledger_path, index.ledger_bytes)
            if prefix is None or hashlib.sha256(prefix).hexdigest() != index.ledger_sha256:
                if self._kept is not None and self._kept_sha == index.ledger_sha256:
                    raise LedgerKept(self._kept)  # the same stored ledger: not read again
                raise LedgerKept(self._kept_words(index))  # the store's is the record
            self._ledger_hash = hashlib.sha256(prefix)
            self._index = index
        self._index = replace(self._index, campaign=mine)  # whose part this is, said
        self._rescan(self.engine.journal.report.events)
        if not any(o.kind == ObjectKind.PLAN for o in self._index.objects):
            self._waiting.put_first(Job(ObjectKind.PLAN, ".itera/plan.toml", self.layout.plan,
                                         None, self.clock()))

    def _kept_words(self, index: StoreIndex) -> str:
        """Why the ledger here is not pushed over the store's (ledger_guard.py): shorter
        than it (cut) or different within it, told by the store's own bytes."""
        from .fetch import read_ledger

        stored = read_ledger(self.store, self.layout.part, index)  # StoreError: retried
        self._kept_bytes, self._kept_sha = len(stored), index.ledger_sha256
        try:
            local = self.ledger_path.read_bytes()
        except OSError:
            local = b""
        how = fit_bytes(local, stored)
        return kept_words(self.url, len(local), len(stored),
                          Fit.DIVERGES if how is Fit.EXTENDS else how)

    def _probe_if_due(self) -> None:
        """The store timed once (how long the bundle's delivery will take), a while
        after the start and only when no upload has timed it: never in the start's burst."""
        if self._rate_mb_s is not None or time.monotonic() < self._probe_at:
            return
        from .probe import measure

        self.fence()
        m = measure(self.store, self.layout.part, START_PROBE_BYTES)
        self._rate_mb_s = min(m.write_mb_s, m.read_mb_s)

    def _push_ledger(self) -> None:
        """The ledger's new whole lines, as byte ranges, each read back and checked."""
        fs = self.store.fs
        while True:
            dirty_t = self._ledger_dirty_t
            start = self._index.ledger_bytes
            data = _read_lines_from(self.ledger_path, start, SEGMENT_MAX)
            if not data:
                if dirty_t is not None and self._ledger_dirty_t == dirty_t:
                    self._ledger_dirty_t = None
                return
            end = start + len(data)
            key = self.store.path(self.layout.ledger_segment(start, end))
            self.fence()
            sent = upload_bytes(fs, data, key)
            back = hash_remote(fs, key)
            if back != sent:
                raise OSError(f"ledger range {start}-{end} read back differs "
                              f"({back.bytes} bytes stored)")
            self._ledger_hash.update(data)
            self._index = replace(self._index, ledger_bytes=end,
                                  ledger_sha256=self._ledger_hash.hexdigest(),
                                  ledger_t=self.clock())
            self._write_index()
            self._compact()

    def _compact(self) -> None:
        from .fetch import ledger_segments

        segments = ledger_segments(self.store, self.layout.part)
        if len(segments) < COMPACT_AFTER:
            return
        end = self._index.ledger_bytes
        fs = self.store.fs
        key = self.store.path(self.layout.ledger_segment(0, end))
        self.fence()
        sent = upload_file(fs, self.ledger_path, key, limit=end)
        if sent.sha256 != self._index.ledger_sha256 or remote_size(fs, key) != end:
            raise OSError("the joined ledger range does not match what was stored")
        for a, b, path in segments:
            if b <= end and (a, b) != (0, end):
                fs.rm(path)

    def _store(self, job: Job) -> None:
        local = self.root / job.source
        controlled = job.kind in RUN_CONTROLLED
        if controlled and job.run and self._not_the_runs_own(job):
            self._skipped += 1  # a link out of the run's folder, a FIFO: never sent
            return
        # an HF `checkpoint-N/` (the callback's, or a watched one): a folder (folders.py)
        folder = job.kind == ObjectKind.CHECKPOINT and local.is_dir() and not local.is_symlink()
        if not (folder or local.is_file()):  # gone before its turn (rotated): not stored
            self._skipped += 1
            return
        fs = self.store.fs
        key, replaces = self._fresh_key(job)
        remote = self.store.path(key)
        t0 = time.monotonic()
        self.fence()
        try:
            if folder:  # each file checked by size and hash, its manifest last
                moved = upload_folder(fs, local, remote)
            else:
                moved = upload_file(fs, local, remote, limit=job.tail,
                                    tail=job.tail is not None, run_controlled=controlled)
        except LocalGone:  # removed while it waited (a checkpoint rotated away): not stored
            self._skipped += 1
            return
        if moved.bytes >= 1 << 20:  # big enough to time the store's bandwidth
            rate = moved.bytes / 1e6 / max(1e-6, time.monotonic() - t0)
            self._rate_mb_s = rate if self._rate_mb_s is None else \
                0.7 * self._rate_mb_s + 0.3 * rate
        size = moved.bytes if folder else remote_size(fs, remote)
        if size != moved.bytes:
            raise OSError(f"{key}: {size} bytes in the store after sending {moved.bytes}")
        obj = StoredObject(key, moved.bytes, moved.sha256, job.kind, job.run, job.source,
                           self.clock(), moved.files if folder else None)
        self._index = self._index.with_object(obj, replaces=replaces)
        self._note_stored(job)
        self._noted.append({"kind": job.kind, "key": key, "bytes": moved.bytes,
                            "sha256": moved.sha256, **({"run": job.run} if job.run else {})})

    def _note_stored(self, job: Job) -> None:
        if job.newest_of_run and job.run and job.step is not None:
            self._stored_step[job.run] = max(job.step, self._stored_step.get(job.run, 0))

    def _lacking(self) -> tuple[int, int, int | None]:
        """(verified checkpoints waiting, of how many runs, the steps a box lost now would
        redo for them: each run's newest waiting step less its newest stored one)."""
        newest: dict[str, int | None] = {}
        n = 0
        for job in self._waiting:
            if job.newest_of_run and job.run:
                n += 1
                old = newest.get(job.run, 0)
                newest[job.run] = None if job.step is None or old is None else max(old, job.step)
        if not newest or any(step is None for step in newest.values()):
            return n, len(newest), None
        return n, len(newest), sum(max(0, s - self._stored_step.get(r, 0))
                                   for r, s in newest.items())

    def _fresh_key(self, job: Job) -> tuple[str, str | None]:
        """(where to store it, the index entry it replaces). A run's records and logs are
        stored again (at each verified save, then whole at its exit) and never over the
        copy the index names: a box killed between an upload and the index that lists it
        would leave an index whose object changed under it (`resume` refuses it as
        damaged). Two slots, `<key>` and `<key>.next`: the one the index does not name
        is written, then the index names it instead."""
        if job.kind not in RUN_CONTROLLED:
            return job.key, None
        other = job.key + NEXT_SLOT
        if self._index.object(job.key) is not None:
            return other, job.key
        return job.key, (other if self._index.object(other) is not None else None)

    def _not_the_runs_own(self, job: Job) -> bool:
        """Whether a file the run controls is anything but a regular file of its own
        folder reached through no link (the conclusion's own test for a deliverable)."""
        from ..engine.conclusion.outcome import deliverable_problem

        run_dir = self.state_dir / "runs" / job.run
        prefix = f".itera/runs/{job.run}/"
        if not job.source.startswith(prefix):
            return True
        problem = deliverable_problem(run_dir, job.source[len(prefix):])
        return problem not in (None, "empty")  # an empty stream or file is still its own

    def _write_index(self) -> None:
        """The index, then the store_object events of what it newly lists."""
        self.fence()
        upload_bytes(self.store.fs, self._index.to_json().encode(),
                     self.store.path(self.layout.index))
        noted, self._noted = self._noted, []
        for fields in noted:
            self.engine.note(StoreObject(**fields))

    def fence(self) -> None:
        """Before any write: Superseded once another box holds the campaign."""
        if self.lease is not None:
            self.lease.ensure()

    def record_bundle(self, bundle: BundleAtStore) -> None:
        """The delivery's result (deliver.py), kept in the index and the status."""
        self._bundle = bundle
        self._index = replace(self._index, bundle={
            "key": self.layout.bundle, "verified": bundle.verified, "files": bundle.files,
            "bytes": bundle.bytes, "t": bundle.t})
        try:
            if self._kept is None:  # a part whose ledger is kept is never written
                self._write_index()
        finally:
            self._publish()

    @property
    def kept(self) -> str | None:
        """Why nothing is written to the store (its ledger is not this one's past:
        ledger_guard.py), None when the mirror writes."""
        return self._kept

    # -- up and down ----------------------------------------------------------------------
    def _failed(self, exc: Exception) -> None:
        from ..campaign.text import for_terminal

        why = for_terminal(f"{type(exc).__name__}: {exc}")[:300]
        self._problem = why
        if self._down_since is None:
            self._down_since = self.clock()
        if not isinstance(exc, StoreNotAnswering):
            self._silent_since = None  # it answered (with a refusal)
        elif self._silent_since is None:  # the abandoned request waited STALL_S
            self._silent_since = max(self._down_since, self.clock() - transfer.STALL_S)
        self._back_since, self._back_passes = None, 0  # a flap: the hold starts over
        if not self._said_down:
            self._said_down = True
            self._outage_since = self._down_since
            self.engine.note(StoreDown(url=self.store.label, message=why))

    def _answered(self, closing: bool = False) -> None:
        """A pass that reached the store. The status says so at once; the ledger (and
        so the notices) only once it has held, or at the close (nothing more to flap)."""
        now = self.clock()
        self._down_since, self._problem, self._silent_since = None, None, None
        if not self._said_down:
            return
        if self._back_since is None:
            self._back_since = now
        self._back_passes += 1
        if not closing and (now - self._back_since < UP_HOLD_S
                            or self._back_passes < UP_HOLD_PASSES):
            return
        down_s = self._back_since - (self._outage_since or self._back_since)
        self._said_down, self._outage_since = False, None
        self._back_since, self._back_passes = None, 0
        self.engine.note(StoreUp(url=self.store.label, down_s=round(down_s, 1),
                                 stored=len(self._index.objects) + 1))

    def _publish(self, force: bool = False) -> None:
        """The status for the faces, at most every PUBLISH_S unless it changed in kind (or
        `force`: someone waits for this pass's word)."""
        key = (len(self._index.objects), len(self._waiting), self._down_since,
               self._bundle is not None, self._kept, self._silent_since)
        mono = time.monotonic()
        if not force and key == self._published_key and mono - self._published_at < PUBLISH_S:
            return
        self._published_key, self._published_at = key, mono
        now = self.clock()
        ledger_bytes = _size(self.ledger_path)
        waiting = list(self._waiting)
        oldest = [j.t for j in waiting]
        if self._ledger_dirty_t is not None and ledger_bytes > self._index.ledger_bytes:
            oldest.append(self._ledger_dirty_t)
        stored = len(self._index.objects) + (1 if self._index.ledger_bytes else 0)
        ledger_wait = 1 if ledger_bytes > self._index.ledger_bytes and \
            not self._index.ledger_bytes else 0
        status = MirrorStatus(
            url=self.url, stored=stored, total=stored + len(waiting) + ledger_wait,
            behind_s=(now - min(oldest)) if oldest else None, down_since=self._down_since,
            problem=self._problem, ledger_bytes=ledger_bytes,
            ledger_stored=self._kept_bytes if self._kept else self._index.ledger_bytes,
            t=now, bundle=self._bundle, kept=self._kept is not None,
            silent_since=self._silent_since, lacks=self._lacking())
        with self._lock:
            self._status = status
        try:
            write_status(self.state_dir, status)
        except OSError:
            pass  # a full disk: the snapshot still has it

    def delivery_estimate_s(self) -> float | None:
        """Seconds to deliver the bundle and read it back at the store: the expected
        size ([store] bundle_mb, else what is stored so far) at the measured rate.
        From memory only: the session asks on the engine's loop."""
        rate = self._rate_mb_s
        if rate is None:
            return None
        size_mb = self.plan.store.bundle_mb
        if size_mb is None:
            size_mb = sum(o.bytes for o in self._index.objects) / 1e6
        return 2 * size_mb / rate

    def wait_caught_up(self, timeout: float) -> bool:
        """For a box going down (`CampaignSession.flush_store`) and tests: True once nothing
        waits, as a pass of the thread begun after this call found it (polled, bounded).
        The status published before it may predate what the engine has just handed over
        (a checkpoint verified a moment ago, still in the intake, or taken by a pass still
        storing): it said "caught up" while checkpoint folders were being stored, once, on
        a busy box."""
        deadline = time.monotonic() + timeout
        asked = self._passes_begun
        with self._lock:
            self._waiters += 1
        try:
            while time.monotonic() < deadline:
                if self.lease is not None and self.lease.superseded is not None:
                    return False  # nothing more goes to the store from this box
                self._wake.set()
                done = self._passes_done  # before the status: that pass's, or a later one
                st = self.status()
                if done > asked and st.caught_up and st.down_since is None \
                        and st.ledger_bytes and st.t:
                    return True
                time.sleep(0.05)
            return False
        finally:
            with self._lock:
                self._waiters -= 1


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_prefix(path: Path, n: int) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read(n)
        return data if len(data) == n else None
    except OSError:
        return None


def _read_lines_from(path: Path, start: int, limit: int) -> bytes:
    """Whole lines from byte `start` (at most `limit` bytes, cut at a newline)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(start)
            data = fh.read(limit)
    except OSError:
        return b""
    cut = data.rfind(b"\n")
    return data[:cut + 1] if cut >= 0 else b""
