"""Processes that outlive their run: found, named in the ledger, and ended after the grace.

A run's launcher leads its own process group and session, and a stop signals
that group. But a script can leave a child behind when it exits normally (the
group lives on without its leader), and a grandchild that called `setsid()`
is in neither the group nor the session; either keeps its GPU and its share
of the box. (systemd's `KillMode=control-group` is the model: nothing
outlives its unit.) So a run's processes are found three ways: its process
group and its session (numbered by the launcher's pid), the descendants of
its launcher (sampled while the very launcher lives, every `TRACK_EVERY_S`,
since an orphan is re-parented away), and its environment (read after a
restart too). A group or session only points at a candidate: the launcher's
pid is free again once the group empties, and another campaign's launcher may
lead a group of that number. What decides is the run's marks
(`belonging.marked`: run id and run directory, which lies in this campaign
folder), or having been sampled as a child of the verified launcher. Each is
known by pid *and* start time, so a reused pid is never signalled.

When the run has exited, whatever is left gets SIGTERM and one `run_leftovers`
event naming each process; after the plan's grace, those still alive get
SIGKILL (`run_leftovers_killed`, named again). Never the engine itself or its
ancestors, never pid 1.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

import psutil

from .belonging import RunIdentity, launcher_of, marked
TRACK_EVERY_S = 2.0  # how often a live run's process tree is sampled
NAME_CHARS = 120  # of a command line, in the ledger


@dataclass(frozen=True)
class Leftover:
    """A process of a run, by identity (pid and start time) and as a person reads it."""

    pid: int
    create_time: float
    name: str
    command: str
    how: str  # "group" | "session" | "descendant" | "environment"

    def to_dict(self) -> dict:
        return {"pid": self.pid, "name": self.name, "command": self.command, "how": self.how}


def _describe(proc: psutil.Process, how: str) -> Leftover | None:
    try:
        with proc.oneshot():
            if proc.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                return None
            command = " ".join(proc.cmdline())[:NAME_CHARS]
            return Leftover(proc.pid, proc.create_time(), proc.name(), command, how)
    except (psutil.Error, OSError):
        return None


def _untouchable() -> set[int]:
    """The engine and its ancestors (a run started from a shell a run started: never us)."""
    out = {0, 1, os.getpid()}
    try:
        out.update(p.pid for p in psutil.Process().parents())
    except psutil.Error:
        pass
    return out


def alive(leftover: Leftover) -> bool:
    try:
        proc = psutil.Process(leftover.pid)
        return (abs(proc.create_time() - leftover.create_time) < 0.05
                and proc.status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD))
    except (psutil.Error, OSError):
        return False


def signal_one(leftover: Leftover, sig: int) -> bool:
    """Signal one process, only if it is still the very one found."""
    if leftover.pid in _untouchable() or not alive(leftover):
        return False
    try:
        os.kill(leftover.pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


class RunProcesses:
    """The processes of one run: tracked while it lives, found when it has ended."""

    def __init__(self, identity: RunIdentity, launcher_pid: int | None,
                 launcher_start: float | None = None):
        self.identity = identity
        self.run_id = identity.run_id
        self.launcher_pid = launcher_pid if isinstance(launcher_pid, int) else None
        self.launcher_start = launcher_start
        self._tracked: dict[tuple[int, float], Leftover] = {}
        self._last_track = float("-inf")

    def track(self, mono: float) -> None:
        """Note the launcher's descendants (at most every TRACK_EVERY_S)."""
        if self.launcher_pid is None or mono - self._last_track < TRACK_EVERY_S:
            return
        self._last_track = mono
        # only the very launcher (pid, start time, marks): a reused pid has other children
        if not launcher_of(self.launcher_pid, self.launcher_start, self.identity):
            return
        try:
            children = psutil.Process(self.launcher_pid).children(recursive=True)
        except (psutil.Error, OSError):
            return
        for child in children:
            found = _describe(child, "descendant")
            if found is not None:
                self._tracked.setdefault((found.pid, found.create_time), found)

    def pids(self) -> set[int]:
        """The launcher's pid and its descendants' as last tracked (which GPU processes
        NVML lists are this run's)."""
        own = {self.launcher_pid} if self.launcher_pid is not None else set()
        return own | {pid for pid, _ in self._tracked}

    def find(self) -> list[Leftover]:
        """Every live process of the run, the launcher excluded (it is the run)."""
        never = _untouchable() | ({self.launcher_pid} if self.launcher_pid else set())
        found: dict[tuple[int, float], Leftover] = {}
        for leftover in self._tracked.values():
            if leftover.pid not in never and alive(leftover):
                found[(leftover.pid, leftover.create_time)] = leftover
        for proc in psutil.process_iter():
            if proc.pid in never:
                continue
            how = self._belongs(proc)
            if how is None:
                continue
            described = _describe(proc, how)
            if described is not None:
                found.setdefault((described.pid, described.create_time), described)
        return sorted(found.values(), key=lambda p: p.pid)

    def _belongs(self, proc: psutil.Process) -> str | None:
        """How the process is the run's, or None. Its group or session numbered by the
        launcher's pid only points at it: the run's marks (`belonging.marked`) decide,
        since the launcher may be long gone and its pid a new group's (another
        campaign's launcher, say)."""
        leader = self.launcher_pid
        try:
            how = "environment"
            if leader is not None:
                if os.getpgid(proc.pid) == leader:
                    how = "group"
                elif os.getsid(proc.pid) == leader:
                    how = "session"
        except (psutil.Error, OSError):
            return None
        return how if marked(proc, self.identity) else None


def terminate_all(leftovers: list[Leftover]) -> list[Leftover]:
    return [p for p in leftovers if signal_one(p, signal.SIGTERM)]


def kill_all(leftovers: list[Leftover]) -> list[Leftover]:
    return [p for p in leftovers if signal_one(p, signal.SIGKILL)]
