"""Checkpoint verification: a bounded queue over one fresh verifier process.

A checkpoint counts (for the `resume` rule, the runs table, the bundle) only
once a process that did not write it has loaded it. One verifier process
(`python -m tui.training.file_check --serve`, through `VerifierClient`) serves
every check, torch imported once; it takes `bound` files at a time (one by
default), so an engine restart or a burst of acknowledgements queues work
instead of fanning out (90 verifiers once took a 24 GB box down and changed a
result). Each start and verdict goes to the ledger; a verifier that dies or
hangs is restarted by the client and the file tried once more, then the
failure is named in the events; `close()` kills and reaps the process, and a
verifier also dies with the engine (PDEATHSIG), so the next engine resumes the
queue instead of running beside an orphan.

A trainer may rotate a checkpoint away (HF `save_total_limit`, Lightning's
`save_top_k`) before its turn comes. The SDK holds each one it acknowledges
with hard links (`tui.campaign.held`): the verifier reads the held copy, which
is released once the verdict is in. A checkpoint whose original is gone by then
is recorded as `checkpoint_rotated`: "rotated away by the trainer", after its
verdict when the held copy could be read, instead of one when nothing was left
to read; a vanished checkpoint is never a FAILED verification.

A file rewritten in place (nanoGPT's `ckpt.pt`) is acknowledged once per save,
each with its own held copy (tui.engine.checkpoints.watched): every one is
queued under its own copy, and the verdict names the sha256 the verifier read,
which must be the one acknowledged (else it is no verification of that
checkpoint: FAILED, "digest mismatch"). Held copies stay bounded per
checkpoint path: the one being verified, the newest one waiting (a newer save
replaces an older one still waiting, whose copy goes: only the newest is worth
verifying), and the run's newest watched checkpoint that verified, kept for
the store and the bundle (`CheckpointVerified.held`) until a newer one of the
run verifies: one per run. The SDK's links are released at the verdict, as
before: they hold bytes nobody rewrites, and kept they would keep every
checkpoint a trainer rotates away.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from ...campaign.held import held_path, release
from ..ledger.journal import Journal
from ..ledger.events import CheckpointRotated, CheckpointVerificationStarted, CheckpointVerified, WarningEvent

TIMEOUT_S = 900.0
IDLE_STOP_S = 300.0  # an idle verifier holds ~300 MB (torch): let it go, restart on need


@dataclass(frozen=True)
class VerifyJob:
    """One acknowledged checkpoint waiting for its verdict from a fresh process."""
    run: str
    path: str  # relative to the run directory, as acknowledged
    held: str | None = None  # the engine's copy, read instead while it exists
    step: int | None = None  # as acknowledged
    # a watched file that names no step: the run's step by its last record written before
    # the file's mtime, its step when the verifier cannot read one inside it either
    by_time: int | None = None
    sha256: str | None = None  # as acknowledged: the verifier must read these bytes
    keep: bool = False  # `held` is the engine's own copy of a file: kept once verified

    def step_of(self, verdict) -> int | None:
        """What the file holds, else (named nothing) the step by its mtime."""
        if isinstance(verdict.step, int):
            return verdict.step
        return self.by_time if self.step is None else None


class VerificationQueue:
    def __init__(self, journal: Journal, runs_dir: Path, env: Callable[[], dict],
                 bound: int = 1, timeout_s: float = TIMEOUT_S,
                 code_dir: Path | None = None, client_factory=None):
        self.journal = journal
        self.runs_dir = Path(runs_dir)
        self.env = env
        self.bound = max(1, bound)
        self.timeout_s = timeout_s
        self.code_dir = code_dir
        self._client_factory = client_factory or self._default_client
        self._client = None
        self._queue: deque[VerifyJob] = deque()
        self._active: dict[int, VerifyJob] = {}
        self._idle_since: float | None = None
        self.idle_stop_s = IDLE_STOP_S
        self._kept: dict[str, str] = {}  # run -> its newest verified copy (a watched file)

    def _default_client(self):
        from .verifier import VerifierClient

        return VerifierClient(env=self.env(), timeout_s=self.timeout_s,
                              max_inflight=self.bound)

    # -- what is waiting --------------------------------------------------
    def submit(self, rid: str, rel_path: str | None, held: str | None = None,
               step: int | None = None, by_time: int | None = None,
               sha256: str | None = None, keep: bool = False) -> None:
        if not rel_path:
            return
        job = VerifyJob(rid, rel_path, held, step, by_time, sha256, keep)
        if any(j.run == rid and j.path == rel_path and j.held == held
               for j in list(self._queue) + list(self._active.values())):
            return  # this very copy is on its way
        for waiting in [j for j in self._queue if j.run == rid and j.path == rel_path]:
            self._queue.remove(waiting)  # a newer save of it: only the newest is verified
            if waiting.held != held:
                release(self.runs_dir / rid, waiting.held)
        self._queue.append(job)

    def resume_unverified(self) -> None:
        """Queue (never start all at once) what a previous engine left unverified: the
        newest acknowledgement of each path, when no verdict names its bytes; the copy
        kept for the run's newest verdict is known again, the others let go."""
        for run in self.journal.state.runs:
            run_dir = self.runs_dir / run.id
            kept = next((v.held for v in reversed(run.verified) if v.ok and v.held), None)
            if kept is not None:
                self._kept[run.id] = kept
            paths_read = {v.path for v in run.verified} | set(run.rotated)
            newest = {ack.path: ack for ack in run.checkpoints if ack.path}
            for ack in run.checkpoints:
                if ack.held and ack.held != kept and newest.get(ack.path) is not ack:
                    release(run_dir, ack.held)  # superseded before a verdict, or verified
            for path, ack in newest.items():
                if run.verdict_of(ack) is not None or path in run.rotated:
                    continue
                if ack.held is not None and held_path(run_dir, ack.held) is None \
                        and path in paths_read:
                    continue  # its copy is gone, its file saved over since: never misread
                if run.state == "cut" and not (run_dir / path).exists():
                    continue  # unverified on a box that went away: not fetched here
                self.submit(run.id, path, ack.held, ack.step, sha256=ack.sha256,
                            keep=ack.mode == "watched")

    def pending(self) -> int:
        return len(self._queue) + len(self._active)

    def pending_for(self, rid: str) -> bool:
        return any(j.run == rid for j in self._queue) or any(
            j.run == rid for j in self._active.values())

    def in_flight(self) -> int:
        return len(self._active)

    # -- the work ------------------------------------------------------------
    def poll(self) -> None:
        if self._client is not None:
            for verdict in self._client.poll():
                job = self._active.pop(verdict.id, None)
                if job is not None:
                    self._record(job, verdict)
        while self._queue and len(self._active) < self.bound:
            self._start(self._queue.popleft())
        if self._client is None:
            return
        now = time.monotonic()
        if self.pending():
            self._idle_since = None
        elif self._idle_since is None:
            self._idle_since = now
        elif now - self._idle_since >= self.idle_stop_s:
            self._client.stop_if_idle()  # the client restarts it on the next submit

    def _start(self, job: VerifyJob) -> None:
        if self._client is None:
            self._client = self._client_factory()
        run_dir = self.runs_dir / job.run
        held = held_path(run_dir, job.held)
        vid = self._client.submit(held or run_dir / job.path, code_dir=self.code_dir)
        self._active[vid] = job
        self.journal.record(CheckpointVerificationStarted(run=job.run, path=job.path,
                            attempt=1, **({"pid": self._client.pid} if self._client.pid
                                          else {})))

    def _record(self, job: VerifyJob, verdict) -> None:
        run_dir = self.runs_dir / job.run
        read_held = held_path(run_dir, job.held) is not None
        verdict = _against_ack(job, verdict)
        if not (verdict.ok and read_held and job.keep):
            release(run_dir, job.held)
        if not os.path.lexists(run_dir / job.path):  # the trainer rotated it away
            step = job.step if job.step is not None and not isinstance(verdict.step, int) \
                else job.step_of(verdict)
            if not verdict.ok and not read_held:  # nothing was left to read: no verdict
                self.journal.record(CheckpointRotated(run=job.run, path=job.path,
                                    step=step, verified=None))
                return
            self._verified(job, verdict, read_held)
            self.journal.record(CheckpointRotated(run=job.run, path=job.path, step=step,
                                verified=verdict.ok is True))
            return
        self._verified(job, verdict, read_held)

    def _verified(self, job: VerifyJob, verdict, read_held: bool) -> None:
        kept = job.held if verdict.ok and read_held and job.keep else None
        self.journal.record(CheckpointVerified(run=job.run, path=job.path,
                            ok=verdict.ok is True, problem=_text(verdict.problem),
                            step=job.step_of(verdict), sha256=verdict.sha256, held=kept))
        if kept is not None:  # the run's newest verified copy: the older one goes
            before = self._kept.get(job.run)
            self._kept[job.run] = kept
            if before is not None and before != kept:
                release(self.runs_dir / job.run, before)
        if not verdict.ok and verdict.attempts > 1:  # the verifier itself failed twice
            self.journal.record(WarningEvent(run=job.run,
                                message=f"checkpoint {job.path} of {job.run} could not be "
                                        f"verified: {verdict.problem} (tried "
                                        f"{verdict.attempts} times)"))

    def close(self) -> None:
        """Kill and reap the verifier; its jobs are resumed by the next engine."""
        if self._client is not None:
            self._client.close()
            self._client = None
        self._active.clear()
        self._queue.clear()


def _against_ack(job: VerifyJob, verdict):
    """The verdict, FAILED when the bytes read are not the ones acknowledged (a file
    rewritten in place after it was acknowledged, read where it lies)."""
    if not verdict.ok or job.sha256 is None or verdict.sha256 in (None, job.sha256):
        return verdict
    return replace(verdict, ok=False, problem=(
        f"digest mismatch: the bytes read (sha256 {verdict.sha256[:12]}…) are not the ones "
        f"acknowledged ({job.sha256[:12]}…): the file changed after it was acknowledged"))


def _text(value) -> str | None:
    return None if value is None else str(value)[:500]
