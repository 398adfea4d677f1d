"""The objects waiting to be stored: once per key, taken in the order `resume` needs.

After a long outage the mirror's queue holds up to `mirror.INTAKE_MAX` objects. It
was a list scanned whole to queue one object (is its key already waiting?) and again
to take one (the first due by rank), so catching up after an outage cost the
square of the queue, on the thread that shares the engine's interpreter: 10 000
waiting objects held the GIL for minutes while the rules waited. Here a key finds its
job in a dict and the next job comes off a heap: a catch-up is n log n.

The order: by `rank` (the plan, then checkpoints, results, logs; within a kind, the
oldest first), a job not yet due (a log waits a little: exits come in bursts) held
back until it is, and every job due once the mirror is closing.
"""

from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from .layout import ObjectKind

RUN_CONTROLLED = frozenset({ObjectKind.LOG, ObjectKind.RESULT})  # a run can swap these


@dataclass(frozen=True)
class Job:
    """One object to store: its kind, where it is in the campaign folder, its key."""

    kind: str
    source: str  # relative to the campaign folder
    key: str  # below the part
    run: str | None
    t: float  # ledger time it became due (how far behind is measured from it)
    tail: int | None = None  # only the last bytes (logs)
    not_before: float = 0.0  # monotonic: logs wait LOG_DELAY_S (exits come in bursts)
    step: int | None = None  # a checkpoint's step (what a lost box would redo without it)
    group: str | None = None  # a checkpoint's key, its sidecar's too (replaced together)

    @property
    def newest_of_run(self) -> bool:
        """A run's verified checkpoint itself (not its sidecar): it replaces the run's
        older ones still waiting."""
        return self.kind == ObjectKind.CHECKPOINT and self.group == self.key


# the order objects go in when several wait: what `resume` needs first
_RANK = {ObjectKind.PLAN: 0, ObjectKind.CHECKPOINT: 1, ObjectKind.RESULT: 2, ObjectKind.LOG: 3}


def rank(job: Job) -> tuple:
    return _RANK.get(job.kind, 2), job.t


@dataclass(frozen=True)
class _Slot:
    job: Job
    seq: int  # the key's place in the queue: ties of rank go first come, first served
    version: int  # heap entries of an older version of the key are stale


class WaitingJobs:
    """The mirror's queue. Not thread-safe: the mirror's thread alone uses it."""

    def __init__(self, rank_of: Callable[[Job], tuple] = rank,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._rank = rank_of
        self._monotonic = monotonic
        self._slots: dict[str, _Slot] = {}
        self._ready: list[tuple] = []  # (rank, seq, version, key): due
        self._later: list[tuple] = []  # (not_before, seq, version, key): not yet due
        self._checkpoints: dict[str, set[str]] = {}  # run -> keys of its waiting checkpoints
        self._seq = itertools.count()
        self._version = itertools.count()
        self._first = itertools.count(-1, -1)  # put_first: before every queued key

    def __len__(self) -> int:
        return len(self._slots)

    def __iter__(self) -> Iterator[Job]:
        """The waiting jobs, in the order they were queued."""
        return iter([slot.job for slot in sorted(self._slots.values(), key=lambda s: s.seq)])

    def add(self, job: Job) -> None:
        """Queue `job` once per key. A newer job of a key takes the waiting one's place
        where it says more: a checkpoint verified again under the same key (a file
        rewritten in place, held by a newer copy), a run's records at its exit after
        those at a save (the newer says when they are whole). A run's newer verified
        checkpoint replaces its older ones still waiting (and their sidecars)."""
        if job.newest_of_run and job.run:
            for key in list(self._checkpoints.get(job.run, ())):
                if self._slots[key].job.group not in (None, job.group):
                    self._drop(key)
        waiting = self._slots.get(job.key)
        if waiting is None:
            self._put(job, next(self._seq))
        elif job.kind == ObjectKind.CHECKPOINT or job.kind in RUN_CONTROLLED:
            self._put(job, waiting.seq)

    def put_first(self, job: Job) -> None:
        """Queue `job` ahead of every job of its rank already waiting (the plan)."""
        if job.key not in self._slots:
            self._put(job, next(self._first))

    def next_due(self, closing: bool) -> Job | None:
        """The waiting job to store next: of those due, the first by rank. Closing,
        every job is due."""
        now = self._monotonic()
        while self._later and (closing or self._later[0][0] <= now):
            _, seq, version, key = heapq.heappop(self._later)
            slot = self._slots.get(key)
            if slot is not None and slot.version == version:
                heapq.heappush(self._ready, (self._rank(slot.job), seq, version, key))
        while self._ready:
            _, _, version, key = self._ready[0]
            slot = self._slots.get(key)
            if slot is not None and slot.version == version:
                return slot.job
            heapq.heappop(self._ready)  # a stale entry: its key was replaced or dropped
        return None

    def remove(self, job: Job) -> None:
        """`job` is stored: off the queue (unless a newer job of its key replaced it)."""
        slot = self._slots.get(job.key)
        if slot is not None and slot.job is job:
            self._drop(job.key)

    def _put(self, job: Job, seq: int) -> None:
        old = self._slots.get(job.key)
        if old is not None and old.job.run and old.job.kind == ObjectKind.CHECKPOINT:
            self._checkpoints.get(old.job.run, set()).discard(job.key)
        version = next(self._version)
        self._slots[job.key] = _Slot(job, seq, version)
        if job.kind == ObjectKind.CHECKPOINT and job.run:
            self._checkpoints.setdefault(job.run, set()).add(job.key)
        if len(self._ready) + len(self._later) > 2 * len(self._slots) + 64:
            self._rebuild()  # replaced keys left stale entries: bounded by the queue
        else:
            self._push(self._slots[job.key], job.key)

    def _push(self, slot: _Slot, key: str) -> None:
        if slot.job.not_before <= self._monotonic():
            heapq.heappush(self._ready, (self._rank(slot.job), slot.seq, slot.version, key))
        else:
            heapq.heappush(self._later, (slot.job.not_before, slot.seq, slot.version, key))

    def _rebuild(self) -> None:
        self._ready, self._later = [], []
        for key, slot in self._slots.items():
            self._push(slot, key)

    def _drop(self, key: str) -> None:
        slot = self._slots.pop(key)
        if slot.job.run and slot.job.kind == ObjectKind.CHECKPOINT:
            keys = self._checkpoints.get(slot.job.run)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._checkpoints[slot.job.run]
