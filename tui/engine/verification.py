"""Checkpoint verification: a bounded queue of fresh-process checks.

A checkpoint counts (for the `resume` rule, the runs table, the bundle) only
once a process that did not write it has loaded it. Verifiers cost a torch
import and the file's size in memory, so they run one at a time by default:
an engine restart or a burst of acknowledgements queues work instead of
fanning out (90 verifiers once took a 24 GB box down and changed a result).
Each start and verdict goes to the ledger; a verifier that dies without a
verdict or hangs is retried once and then named in the events; `close()`
kills and reaps whatever is still in flight.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .journal import Journal

MAX_ATTEMPTS = 2
TIMEOUT_S = 900.0


@dataclass(frozen=True)
class VerifyJob:
    run: str
    path: str  # relative to the run directory, as acknowledged
    attempt: int = 1


@dataclass
class _Active:
    job: VerifyJob
    popen: subprocess.Popen
    started: float


class VerificationQueue:
    def __init__(self, journal: Journal, runs_dir: Path, env: Callable[[], dict],
                 bound: int = 1, timeout_s: float = TIMEOUT_S,
                 monotonic: Callable[[], float] = time.monotonic):
        self.journal = journal
        self.runs_dir = Path(runs_dir)
        self.env = env
        self.bound = max(1, bound)
        self.timeout_s = timeout_s
        self.monotonic = monotonic
        self._queue: deque[VerifyJob] = deque()
        self._active: list[_Active] = []

    # -- what is waiting --------------------------------------------------
    def submit(self, rid: str, rel_path: str | None) -> None:
        if not rel_path or self._known(rid, rel_path):
            return
        self._queue.append(VerifyJob(rid, rel_path))

    def resume_unverified(self) -> None:
        """Queue (never start all at once) what a previous engine left unverified."""
        for run in self.journal.state.runs:
            done = {v.path for v in run.verified}
            for ack in run.checkpoints:
                if ack.path and ack.path not in done:
                    self.submit(run.id, ack.path)

    def _known(self, rid: str, rel_path: str) -> bool:
        jobs = list(self._queue) + [a.job for a in self._active]
        return any(j.run == rid and j.path == rel_path for j in jobs)

    def pending(self) -> int:
        return len(self._queue) + len(self._active)

    def pending_for(self, rid: str) -> bool:
        return any(j.run == rid for j in self._queue) or any(a.job.run == rid
                                                              for a in self._active)

    def in_flight(self) -> int:
        return len(self._active)

    # -- the work ------------------------------------------------------------
    def poll(self) -> None:
        still = []
        for active in self._active:
            if active.popen.poll() is None:
                if self.monotonic() - active.started > self.timeout_s:
                    _reap(active.popen)
                    self._lost(active.job, f"verifier gave no verdict in {self.timeout_s:g} s")
                else:
                    still.append(active)
                continue
            self._finished(active)
        self._active = still
        while self._queue and len(self._active) < self.bound:
            self._start(self._queue.popleft())

    def _start(self, job: VerifyJob) -> None:
        path = self.runs_dir / job.run / job.path
        cmd = [sys.executable, "-m", "tui.training.verify", str(path), "--json"]
        try:
            popen = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL, env=self.env(), text=True,
                                     preexec_fn=die_with_parent)
        except OSError as exc:
            self._lost(job, f"cannot start the verifier: {exc}")
            return
        self.journal.record("checkpoint_verification_started", run=job.run, path=job.path,
                            attempt=job.attempt, pid=popen.pid)
        self._active.append(_Active(job, popen, self.monotonic()))

    def _finished(self, active: _Active) -> None:
        out = active.popen.stdout.read() if active.popen.stdout else ""
        active.popen.stdout and active.popen.stdout.close()
        try:
            verdict = json.loads(out.strip().splitlines()[-1])
            if not isinstance(verdict, dict):
                raise ValueError("not an object")
        except (ValueError, IndexError):
            self._lost(active.job, f"verifier exited {active.popen.returncode} without a "
                                   "verdict")
            return
        step = verdict.get("step")
        self.journal.record("checkpoint_verified", run=active.job.run, path=active.job.path,
                            ok=verdict.get("ok") is True and active.popen.returncode == 0,
                            problem=_text(verdict.get("problem")),
                            step=step if isinstance(step, int) else None)

    def _lost(self, job: VerifyJob, why: str) -> None:
        if job.attempt < MAX_ATTEMPTS:
            self._queue.appendleft(VerifyJob(job.run, job.path, job.attempt + 1))
            return
        self.journal.record("checkpoint_verified", run=job.run, path=job.path, ok=False,
                            problem=f"{why} (tried {job.attempt} times)", step=None)
        self.journal.record("warning", run=job.run,
                            message=f"checkpoint {job.path} of {job.run} could not be "
                                    f"verified: {why} (tried {job.attempt} times)")

    def close(self) -> None:
        """Kill and reap verifiers in flight; their jobs are resumed by the next engine."""
        for active in self._active:
            _reap(active.popen)
        self._active = []
        self._queue.clear()


def die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the engine dies (even by kill -9), so a
    verifier is never orphaned beside the next engine's (Linux; elsewhere a no-op).
    Linux sends it when the *thread* that started the child ends: the engine is
    ticked by one long-lived thread per face (headless: main; room: the pump)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _reap(popen: subprocess.Popen) -> None:
    if popen.poll() is None:
        popen.kill()
    try:
        popen.wait(5)
    except subprocess.TimeoutExpired:
        pass
    if popen.stdout:
        popen.stdout.close()


def _text(value) -> str | None:
    return None if value is None else str(value)[:500]
