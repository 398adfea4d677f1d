"""One fresh verifier process for many files, driven without blocking.

A checkpoint is trusted only once a process that is not its writer has loaded
it; starting one Python (and one torch import) per file made that cost a
second a file and let verifiers pile up. `VerifierClient` starts one
`python -P -m tui.training.file_check --serve` in `/` (isolated: see
verifier_process) when there is work, pipes it one JSON
request per file, and hands back frozen `FileVerdict`s:

- `submit(path) -> id` never blocks; `poll()` returns the verdicts that have
  arrived (an engine tick calls it); `wait()` blocks for the ones asked for;
- a request taking longer than `timeout_s` gets the verifier killed and a
  "timed out" verdict; a verifier that dies while checking a file is restarted
  and the file tried once more, then failed with the verifier's last words;
- the process is always reaped: `close()` (or the context manager, or the
  object being collected) ends it, killing it after a short grace; a verifier
  whose parent dies sees its stdin close and exits after the current file.

One client is driven from one thread (the engine's loop, or the wrap-up);
its reader threads only hand lines over through a queue.

Stdlib only: the engine never imports torch, the verifier process does.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import time
import weakref
from collections import OrderedDict, deque
from dataclasses import dataclass

from .file_verdict import FileVerdict
from .verifier_process import (NEUTRAL_CWD, Worker, fresh_env, isolated_command, isolated_env,
                               kill, start)

__all__ = ["FileVerdict", "VerifierClient", "fresh_env", "isolated_env"]

DEFAULT_TIMEOUT_S = 600.0
START_TIMEOUT_S = 300.0
CLOSE_GRACE_S = 2.0


@dataclass
class _Request:
    id: int
    path: str
    line: str
    attempts: int = 0
    sent_t: float = 0.0


class VerifierClient:
    """Verify files in one fresh process; see the module docstring."""

    def __init__(self, *, timeout_s: float = DEFAULT_TIMEOUT_S, max_attempts: int = 2,
                 max_inflight: int = 8, start_timeout_s: float = START_TIMEOUT_S,
                 env: dict[str, str] | None = None, cwd: str | os.PathLike = NEUTRAL_CWD,
                 python: str = sys.executable, command: list[str] | None = None):
        """`timeout_s`: per file, counted once the verifier is ready (its torch import
        is not a file's time); `start_timeout_s`: for the verifier to become ready."""
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.max_attempts = max(1, max_attempts)
        self.max_inflight = max(1, max_inflight)
        self.env = isolated_env(env)
        self.cwd = cwd
        self.command = command or isolated_command("tui.training.file_check", "--serve",
                                                   python=python)
        self.started = 0  # processes started so far (a restart adds one)
        self._events: queue.Queue = queue.Queue()
        self._worker: Worker | None = None
        self._backlog: deque[_Request] = deque()
        self._inflight: OrderedDict[int, _Request] = OrderedDict()
        self._done: list[FileVerdict] = []
        self._last_answer_t = 0.0
        self._next_id = 0
        self._closed = False
        self._finalizer = None

    # -- the caller's side -------------------------------------------------
    def submit(self, path: str | os.PathLike, *, code_dir: str | os.PathLike | None = None,
               known_sha256: str | None = None, op: str = "verify") -> int:
        """Queue one path (a file or a checkpoint directory); returns its id.
        `code_dir`: the folder whose classes a pickled module may use; `op="globals"`
        asks only which classes its pickles need (its verdict's `needs`)."""
        if self._closed:
            raise RuntimeError("the verifier client is closed")
        self._next_id += 1
        full = os.path.abspath(path)
        request = {"id": self._next_id, "path": full, "op": op,
                   "code_dir": os.path.abspath(code_dir) if code_dir else None,
                   "known_sha256": known_sha256}
        self._backlog.append(_Request(self._next_id, full, json.dumps(request) + "\n"))
        self._pump()
        return self._next_id

    def start(self) -> None:
        """Start the verifier now (it imports torch while the caller does other work);
        otherwise the first submit starts it."""
        if self._worker is None and not self._closed:
            self._worker = self._start()

    @property
    def pending(self) -> int:
        return len(self._backlog) + len(self._inflight)

    @property
    def pid(self) -> int | None:
        worker = self._worker
        return worker.popen.pid if worker is not None and worker.popen.poll() is None else None

    def poll(self) -> list[FileVerdict]:
        """The verdicts that have arrived since the last call; never blocks."""
        while True:
            try:
                self._handle(*self._events.get_nowait())
            except queue.Empty:
                break
        self._check_timeout()
        self._pump()
        done, self._done = self._done, []
        return done

    def wait(self, timeout: float | None = None) -> list[FileVerdict]:
        """Block until every submitted path has a verdict (or `timeout` passes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        out = self.poll()
        while self.pending and (deadline is None or time.monotonic() < deadline):
            try:
                self._handle(*self._events.get(timeout=0.2))
            except queue.Empty:
                pass
            out += self.poll()
        return out

    def wait_for(self, ids, timeout: float | None = None) -> dict[int, FileVerdict]:
        """Block until each of `ids` has a verdict (or `timeout` passes); verdicts of
        other requests stay queued for the next poll()."""
        wanted, got, others = set(ids), {}, []
        deadline = None if timeout is None else time.monotonic() + timeout
        while wanted - got.keys() and (deadline is None or time.monotonic() < deadline):
            for v in self.wait(timeout=0.5):
                (got.__setitem__(v.id, v) if v.id in wanted else others.append(v))
            if not self.pending:
                break
        self._done = others + self._done
        return got

    def verify(self, path, **kwargs) -> FileVerdict:
        """Submit one path and wait for its verdict."""
        rid = self.submit(path, **kwargs)
        return self.wait_for([rid])[rid]

    def stop_if_idle(self) -> bool:
        """End the process when nothing is pending (it holds torch's memory); the
        client stays usable and the next submit starts a fresh one."""
        if self.pending or self._worker is None:
            return False
        self._stop_worker()
        return True

    def close(self) -> None:
        """End the verifier (EOF, then a kill after a short grace); idempotent."""
        self._closed = True
        self._stop_worker()
        for request in list(self._inflight.values()) + list(self._backlog):
            self._done.append(FileVerdict.failed(request.id, request.path,
                                             "verification cancelled: the verifier was closed",
                                             request.attempts))
        self._inflight.clear()
        self._backlog.clear()

    def __enter__(self) -> "VerifierClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the process's side ------------------------------------------------
    def _stop_worker(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            try:
                worker.popen.stdin.close()
            except OSError:
                pass
            try:
                worker.popen.wait(timeout=CLOSE_GRACE_S)
            except subprocess.TimeoutExpired:
                kill(worker.popen)
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None

    def _start(self) -> Worker:
        self.started += 1
        worker = start(self.command, self.env, self.cwd, self._events, self.started)
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(self, kill, worker.popen)
        self._last_answer_t = time.monotonic()
        return worker

    def _pump(self) -> None:
        """Send backlog requests while fewer than max_inflight are in the pipe."""
        while self._backlog and len(self._inflight) < self.max_inflight and not self._closed:
            if self._worker is None:
                try:
                    self._worker = self._start()
                except OSError as error:
                    request = self._backlog.popleft()
                    self._done.append(FileVerdict.failed(request.id, request.path,
                                                     f"cannot start the verifier: {error}", 1))
                    continue
            request = self._backlog.popleft()
            if not self._inflight:
                self._last_answer_t = time.monotonic()
            request.sent_t = time.monotonic()
            self._inflight[request.id] = request
            try:
                self._worker.popen.stdin.write(request.line.encode())
                self._worker.popen.stdin.flush()
            except OSError:
                break  # the process is gone: its end of stream will say so

    def _handle(self, generation: int, obj: dict | None) -> None:
        worker = self._worker
        if worker is None or generation != worker.generation:
            return  # a verdict or an end from a process already replaced
        if obj is None:
            self._lost(worker)
            return
        if obj.get("ready") is True:
            worker.ready_t = self._last_answer_t = time.monotonic()
            return
        request = self._inflight.pop(obj.get("id"), None) if isinstance(obj.get("id"), int) \
            else None
        if request is None:
            return
        self._last_answer_t = time.monotonic()
        self._done.append(FileVerdict.from_json(request.id, request.path, obj,
                                            request.attempts + 1))

    def _head(self) -> _Request | None:
        return next(iter(self._inflight.values()), None)

    def _lost(self, worker: Worker, why: str | None = None) -> None:
        """The process ended (or was killed): retry or fail the file it was on."""
        kill(worker.popen)
        self._worker = None
        code = worker.popen.returncode
        tail = worker.stderr_tail[-1] if worker.stderr_tail else ""
        head = self._head()
        requeue = list(self._inflight.values())
        self._inflight.clear()
        if head is not None:
            head.attempts += 1
            requeue.remove(head)
            if why is not None or head.attempts >= self.max_attempts:
                reason = why or (f"the verifier died while checking it ({head.attempts} "
                                 f"attempts; exit status {code}{': ' + tail if tail else ''})")
                self._done.append(FileVerdict.failed(head.id, head.path, reason, head.attempts))
            else:
                requeue.insert(0, head)
        self._backlog.extendleft(reversed(requeue))

    def _check_timeout(self) -> None:
        head, worker, now = self._head(), self._worker, time.monotonic()
        if head is None or worker is None:
            return
        if worker.ready_t is None:
            if now - worker.started_t > self.start_timeout_s:
                self._lost(worker, why=f"the verifier did not start within "
                                       f"{self.start_timeout_s:g} s (it was killed)")
            return
        if now - max(head.sent_t, self._last_answer_t, worker.ready_t) > self.timeout_s:
            self._lost(worker, why=f"verification timed out after {self.timeout_s:g} s "
                                   "(the verifier was killed)")
