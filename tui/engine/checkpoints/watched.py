"""Checkpoints that user code writes by itself (`[checkpoint] watch = ["GLOB"]`).

Lightning's `ModelCheckpoint`, HF's `checkpoint-N/` folders or a plain
`torch.save` never tell the engine anything, so without this the `resume` rule
fires ("no verified checkpoint") and the bundle holds none of them. The engine
polls a `CheckpointWatcher` per run each tick; it finds what the globs match
(relative to the run directory), waits until each match is complete, hashes it
off the engine's thread and returns acknowledgements in the SDK's shape
(`"mode": "watched"`), which then follow the SDK's path: ledger, fresh-process
verification, `resume` rule, `c` key, runs table, bundle.

A checkpoint's step is what it holds, where that can be told: the step in its
name (`checkpoint-300`, `step_50.pt`), an HF folder's `trainer_state.json`, and
otherwise what the fresh verifier reads inside it (a Lightning `global_step`,
nanoGPT's `iter_num`): so a stepless acknowledgement carries no step of its own,
and `step_by_time` besides, the step of the run's last record written before the
file's mtime, which the verdict takes only when the file names none. Never the
step at which the engine happened to see it: nanoGPT's `ckpt.pt` saved at a
pilot's bound of 50 was seen at 56 and refused as past the bound.

Complete means: an HF checkpoint folder holds a `trainer_state.json` that
parses (HF writes it last); anything else (a file, another folder) has kept its
size and times since the last look, at least `settle_s` seconds earlier, or
its writer has exited (`writer_gone`). A folder's sha256 is
`tui.campaign.files.tree_digest`.

What is acknowledged is what the engine holds. A file is held by its own copy
(`tui.campaign.held.copy_held`: a reflink where the filesystem has them), taken
only while its size, mtime and ctime stay what they were at the last look and
across the copy, and hashed as it is copied: a script that rewrites its
checkpoint in place (nanoGPT's `ckpt.pt`, at every eval) can no longer change
the bytes acknowledged, verified, stored and bundled, and a save landing during
the copy is never acknowledged half-written (the copy is dropped; the new save
settles and is copied in turn). Each save that settled is its own
acknowledgement, with its own step and sha256. A file that cannot be copied (a
full disk) is hashed where it lies, as before the copy existed, and said once:
the verifier then names a save over it as a digest mismatch. A folder is held
by hard links (`hold`): HF and the SDK write a new one per save, never in place.

Nothing a run writes makes this raise: vanished files are dropped, unreadable
ones and links leading out of the run directory are refused and reported once
each (`take_problems`), links inside it are aliases and skipped (their targets
are watched under their own names). Stdlib only.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ...campaign.files import NotATree, sha256_file, sha256_tree, tree_files
from ...campaign.held import copy_held, hold, release, sweep, tag_of
from ..reading.regular_files import read_regular

HELD_PREFIX = "w-"  # the tags of the watcher's holds (the SDK's are `<step>-<sha256>`)
SETTLE_S = 1.0  # one look (SCAN_EVERY_S) apart: the copy's own check does the rest
SCAN_EVERY_S = 1.0
HF_FINAL_FILE = "trainer_state.json"
_STEP_PATTERNS = (re.compile(r"checkpoint-(\d+)$"), re.compile(r"step[=_-]?(\d+)", re.I))


@dataclass(frozen=True)
class Candidate:
    """A match of a watch glob as last seen: what it is and its change signature."""

    path: str  # relative to the run directory, POSIX
    kind: str  # "file" | "tree" | "hf"
    signature: tuple
    step: int | None
    complete: bool  # by its own evidence (HF final file), before any settling


@dataclass
class _Job:
    """One candidate checkpoint being hashed in its own thread, off the engine tick."""
    candidate: Candidate
    thread: threading.Thread | None = None
    result: tuple | None = None  # (sha256, bytes) or None
    error: BaseException | None = None
    held: str | None = None  # its copy (a file) or links (a folder): tui.campaign.held
    changed: bool = False  # a file rewritten between the last look and the end of its copy
    copy_problem: str | None = None  # why a file could not be copied (hashed where it lies)


class _Changed(Exception):
    """The file changed between the look that settled it and the end of its copy."""


def step_of(relative: str) -> int | None:
    """The step a checkpoint name carries (`checkpoint-120`, `step=120`, `step-000120.pt`)."""
    name = relative.rstrip("/").rsplit("/", 1)[-1]
    for pattern in _STEP_PATTERNS:
        found = pattern.search(name)
        if found:
            return int(found.group(1))
    return None


def _hf_state(folder: Path) -> dict | None:
    try:
        state = json.loads(read_regular(folder / HF_FINAL_FILE, limit=16 << 20))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    return state if isinstance(state, dict) else None


def _stat_signature(info: os.stat_result) -> tuple:
    # no st_ctime: holding a folder's files with hard links (and releasing them) changes it
    return (info.st_size, info.st_mtime_ns, info.st_ino)


def _file_signature(info: os.stat_result) -> tuple:
    # a file is held by a copy, which leaves its ctime alone: a write that restores
    # the mtime (os.utime) still changes the ctime
    return _stat_signature(info) + (info.st_ctime_ns,)


class CheckpointWatcher:
    """Finds complete checkpoints matching `globs` under `run_dir`; see the module doc.

    `known`: acknowledgements already in the ledger (dicts with path and bytes),
    so a restarted engine does not hash and acknowledge them again."""

    def __init__(self, run_dir: Path, globs, *, settle_s: float = SETTLE_S,
                 scan_every_s: float = SCAN_EVERY_S, known=()) -> None:
        self.run_dir = Path(run_dir)
        self.globs = tuple(globs)
        self.settle_s = settle_s
        self.scan_every_s = scan_every_s
        self._real_root = os.path.realpath(self.run_dir)
        self._known_bytes = {k.get("path"): k.get("bytes") for k in known if isinstance(k, dict)}
        # a file's saves already acknowledged, by digest: a restarted engine copies and hashes
        # the file again (a save over it while no engine watched has the same size)
        self._known_sha256: dict[str, set] = {}
        for k in known:
            if isinstance(k, dict) and isinstance(k.get("sha256"), str):
                self._known_sha256.setdefault(k.get("path"), set()).add(k["sha256"])
        # copies a stopped engine made but never acknowledged: nothing names them
        sweep(self.run_dir, HELD_PREFIX, {tag_of(k.get("held")) for k in known
                                          if isinstance(k, dict)})
        self._seen: dict[str, tuple[Candidate, float]] = {}  # path -> (candidate, stable since)
        self._step_at: Callable[[float], int | None] | None = None
        self._done: dict[str, tuple] = {}  # path -> signature acknowledged, known or refused
        self._queue: list[Candidate] = []
        self._job: _Job | None = None
        self._last_scan = float("-inf")
        self._problems: list[str] = []
        self._reported: set[str] = set()
        self.vanished = 0

    # -- the engine's calls ----------------------------------------------------------
    def poll(self, now: float, *, writer_gone: bool = False,
             step_at: Callable[[float], int | None] | None = None) -> list[dict]:
        """Acknowledgements for checkpoints found complete and hashed since the last
        poll. Never blocks on hashing; scans at most every `scan_every_s`. `step_at`:
        the run's step by its last record written at or before a wall-clock time (its
        `StepTimes.at`), asked of a checkpoint whose name carries no step at its mtime."""
        self._step_at = step_at or self._step_at
        acks = self._collect(now)
        if writer_gone or now - self._last_scan >= self.scan_every_s:
            self._last_scan = now
            self._scan(now, writer_gone)
        self._start_next()
        return acks

    @property
    def busy(self) -> bool:
        """True while a hash runs or waits; poll again (with writer_gone after the exit)."""
        return self._job is not None or bool(self._queue)

    def drain(self, now: float, timeout_s: float = 600.0,
              step_at: Callable[[float], int | None] | None = None) -> list[dict]:
        """After the run's exit: everything matching is complete, hash it all now
        (blocking, at most `timeout_s`)."""
        acks = self.poll(now, writer_gone=True, step_at=step_at)
        while self._job is not None:
            self._job.thread.join(timeout_s)
            if self._job.thread.is_alive():
                break
            acks += self.poll(now, writer_gone=True, step_at=step_at)
        return acks

    def take_problems(self) -> list[str]:
        """New one-line problems (refused or unreadable matches), each said once."""
        problems, self._problems = self._problems, []
        return problems

    # -- finding candidates --------------------------------------------------------------
    def _problem(self, path: str, message: str) -> None:
        key = f"{path}: {message}"
        if key not in self._reported:
            self._reported.add(key)
            self._problems.append(f"watched checkpoint {key}")

    def _matches(self) -> list[str]:
        found: set[str] = set()
        for pattern in self.globs:
            if os.path.isabs(pattern) or ".." in Path(pattern).parts:
                continue  # refused at load time; never looked up outside the run directory
            try:
                names = glob.glob(pattern, root_dir=self.run_dir, recursive=True)
            except (OSError, ValueError):
                continue
            found.update(n for n in names if not any(p.startswith(".") for p in Path(n).parts))
        return sorted(found)

    def _inspect(self, relative: str) -> Candidate | None:
        full = self.run_dir / relative
        try:
            real = os.path.realpath(full)
            if os.path.commonpath([real, self._real_root]) != self._real_root:
                self._problem(relative, "leads outside the run directory (a link); refused")
                return None
            if os.path.islink(full):
                return None  # a link inside the run directory is an alias: skipped
            info = os.lstat(full)
            if full.is_dir():
                state = _hf_state(full)
                kind = "hf" if state is not None or (full / HF_FINAL_FILE).exists() else "tree"
                files = tuple((name, _stat_signature(os.lstat(path)))
                              for name, path in tree_files(full))
                step = state.get("global_step") if state else None
                return Candidate(relative, kind, files,
                                 step if isinstance(step, int) else step_of(relative),
                                 complete=state is not None and bool(files))
            if full.is_file():
                return Candidate(relative, "file", _file_signature(info), step_of(relative),
                                 complete=False)
        except FileNotFoundError:
            return None
        except NotATree as error:
            self._problem(relative, f"holds {error}; refused (a checkpoint must be self-contained)")
            return None
        except (OSError, ValueError) as error:
            reason = getattr(error, "strerror", None) or type(error).__name__
            self._problem(relative, f"cannot be read ({reason})")
            return None
        return None  # a fifo, socket or device: not a checkpoint

    def _scan(self, now: float, writer_gone: bool) -> None:
        present, ready = set(), []
        for relative in self._matches():
            candidate = self._inspect(relative)
            if candidate is None:
                continue
            present.add(relative)
            previous = self._seen.get(relative)
            same = previous is not None and previous[0].signature == candidate.signature
            since = previous[1] if same else now
            self._seen[relative] = (candidate, since)
            if relative not in self._done and self._known_bytes.get(relative) is not None \
                    and (candidate.kind != "file" or relative not in self._known_sha256):
                if self._known_bytes[relative] == self._size(candidate):
                    self._done[relative] = candidate.signature  # acknowledged before a restart
            if (self._done.get(relative) == candidate.signature or self._queued(relative)
                    or self._size(candidate) == 0):
                continue  # acknowledged, on its way, or nothing written yet
            settled = now - since >= self.settle_s and previous is not None
            if candidate.complete or settled or writer_gone:
                ready.append(candidate)
        # in the order they were written, not by name: `step_50.pt` sorts after
        # `step_200.pt`, and the last acknowledged is the newest for the bundle and a resume
        self._queue.extend(sorted(ready, key=self._written_ns))
        for relative in set(self._seen) - present:
            del self._seen[relative]

    @staticmethod
    def _written_ns(candidate: Candidate) -> int:
        """When it was last written (a folder: its newest file)."""
        if candidate.kind == "file":
            return candidate.signature[1]
        return max((signature[1] for _, signature in candidate.signature), default=0)

    @staticmethod
    def _size(candidate: Candidate) -> int:
        if candidate.kind == "file":
            return candidate.signature[0]
        return sum(signature[0] for _, signature in candidate.signature)

    def _queued(self, relative: str) -> bool:
        in_flight = self._job is not None and self._job.candidate.path == relative
        return in_flight or any(c.path == relative for c in self._queue)

    # -- hashing, off the engine's thread ----------------------------------------------
    def _start_next(self) -> None:
        if self._job is not None or not self._queue:
            return
        candidate = self._queue.pop(0)
        job = _Job(candidate)
        job.thread = threading.Thread(target=self._hash, args=(job,), daemon=True,
                                      name=f"itera-watch-hash {candidate.path}")
        self._job = job
        job.thread.start()

    def _hash(self, job: _Job) -> None:
        full = self.run_dir / job.candidate.path
        # each hold its own folder (a kept copy of the same save is never made over)
        tag = hashlib.sha256(repr((job.candidate.path, job.candidate.signature,
                                   time.time_ns())).encode())
        tag = f"{HELD_PREFIX}{tag.hexdigest()[:16]}"
        try:
            if job.candidate.kind == "file":
                self._copy(job, full, tag)
            else:
                # linked first: a trainer rotating it away (save_total_limit, save_top_k)
                # before the verifier reads it leaves the held copy, not a false "FAILED"
                job.held = hold(self.run_dir, job.candidate.path, tag)
                job.result = sha256_tree(full)
        except _Changed:
            job.changed = True
        except BaseException as error:  # reported by _collect on the engine's thread
            job.error = error

    def _copy(self, job: _Job, full: Path, tag: str) -> None:
        """The file as it settled, copied and hashed, or _Changed (no copy kept)."""
        def unchanged() -> bool:
            return _file_signature(os.lstat(full)) == job.candidate.signature

        if not unchanged():  # rewritten since the look that settled it
            raise _Changed
        try:
            copy = copy_held(self.run_dir, job.candidate.path, tag)
        except FileNotFoundError:
            raise
        except OSError as error:  # a full disk: hashed where it lies, said once
            job.copy_problem = error.strerror or type(error).__name__
            copy = None
        if copy is None:
            job.result = sha256_file(full)
            if not unchanged():
                raise _Changed
            return
        if not unchanged():  # a save landed during the copy: never acknowledged half-made
            release(self.run_dir, copy.path)
            raise _Changed
        job.held, job.result = copy.path, (copy.sha256, copy.bytes)

    def _collect(self, now: float) -> list[dict]:
        job = self._job
        if job is None or job.thread.is_alive():
            return []
        self._job = None
        candidate = job.candidate
        if job.error is not None:
            release(self.run_dir, job.held)
            self._done[candidate.path] = candidate.signature  # retried only once it changes
            if isinstance(job.error, FileNotFoundError):
                self.vanished += 1
            elif isinstance(job.error, NotATree):
                self._problem(candidate.path, f"holds {job.error}; refused")
            elif isinstance(job.error, OSError):
                reason = job.error.strerror or type(job.error).__name__
                self._problem(candidate.path, f"cannot be read ({reason})")
            else:
                self._problem(candidate.path, f"could not be hashed ({type(job.error).__name__})")
            return []
        if job.copy_problem is not None:
            self._problem(candidate.path, f"could not be copied ({job.copy_problem}); "
                                          "verified where it lies")
        if job.changed:
            return []  # rewritten while copied: it settles again, then is copied again
        if candidate.kind != "file" or job.held is None:  # held by links, or not held
            after = self._inspect(candidate.path)
            if after is None or after.signature != candidate.signature:
                release(self.run_dir, job.held)
                return []  # changed or vanished while hashed: it settles again, rehashed
        # a file's copy is the save as it settled, whatever came after: acknowledged
        if job.result[0] in self._known_sha256.get(candidate.path, ()):
            release(self.run_dir, job.held)  # acknowledged before a restart: not again
            self._done[candidate.path] = candidate.signature
            return []
        self._done[candidate.path] = candidate.signature
        sha256, size = job.result
        by_time = None
        if candidate.step is None and self._step_at is not None:
            by_time = self._step_at(self._mtime(candidate))
        return [{"t": now, "step": candidate.step, "event": "checkpoint", "path": candidate.path,
                 "sha256": sha256, "bytes": size, "mode": "watched"}
                | ({"held": job.held} if job.held else {})
                | ({"step_by_time": by_time} if by_time is not None else {})]

    @staticmethod
    def _mtime(candidate: Candidate) -> float:
        """When it was last written (a folder: its newest file), wall-clock seconds."""
        if candidate.kind == "file":
            return candidate.signature[1] / 1e9
        return max((signature[1] for _, signature in candidate.signature), default=0) / 1e9
