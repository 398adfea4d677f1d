"""The engine's one door to the processes of its runs (the process port).

Everything the engine does to a run's process goes through one `Processes`:
start it, ask whether it is still the very process started, read the status its
launcher left, signal its group, and find what it leaves behind. The engine's
modules never call process functions of their own, so a stand-in can take the
box's place: tests hand the engine one that writes a run's files and records
each signal (tests/fakeprocs.py), and rules, decisions, restarts and graces run
under a fake clock with exact figures, no process started.

`HostProcesses` is the real one: the stdlib launcher (`wrapper.py`) in its own
session, psutil, and the proofs of `belonging` (run id, run directory, campaign
folder, pid *and* start time) before any signal. A stand-in must keep the same
promise: it signals nothing it did not start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import psutil

from . import processes
from .belonging import RunIdentity, find_launcher, launcher_of
from .leftovers import Leftover, RunProcesses, kill_all, terminate_all
from .processes import Launched


class RunTree(Protocol):
    """One run's processes: tracked while it lives, found once it has ended."""

    def track(self, mono: float) -> None: ...

    def pids(self) -> set[int]: ...

    def find(self) -> list[Leftover]: ...


class Processes(Protocol):
    """What the engine may do to processes, and all it may do."""

    def launch(self, argv: list[str], env: dict[str, str], run_dir: Path,
               cwd: Path) -> Launched: ...

    def same_process(self, pid: int | None, pid_start: float | None) -> bool: ...

    def read_exit(self, run_dir: Path) -> dict | None: ...

    def is_launcher(self, pid: int | None, pid_start: float | None,
                    identity: RunIdentity) -> bool: ...

    def find_launcher(self, identity: RunIdentity) -> Launched | None: ...

    def terminate(self, pid: int | None, pid_start: float | None,
                  identity: RunIdentity) -> bool: ...

    def kill(self, pid: int | None, pid_start: float | None,
             identity: RunIdentity) -> bool: ...

    def tree(self, identity: RunIdentity, pid: int | None,
             pid_start: float | None) -> RunTree: ...

    def terminate_all(self, found: list[Leftover]) -> list[Leftover]: ...

    def kill_all(self, found: list[Leftover]) -> list[Leftover]: ...


class HostProcesses:
    """The box's own processes (see the module's docstring)."""

    def launch(self, argv, env, run_dir, cwd) -> Launched:
        return processes.launch(argv, env, run_dir, cwd)

    def same_process(self, pid, pid_start) -> bool:
        return processes.same_process(pid, pid_start)

    def read_exit(self, run_dir) -> dict | None:
        return processes.read_exit(run_dir)

    def is_launcher(self, pid, pid_start, identity) -> bool:
        return launcher_of(pid, pid_start, identity)

    def find_launcher(self, identity) -> Launched | None:
        proc = find_launcher(identity)
        if proc is None:
            return None
        try:
            return Launched(proc.pid, proc.create_time(), None)
        except psutil.Error:  # gone between the look and the question
            return None

    def terminate(self, pid, pid_start, identity) -> bool:
        return processes.terminate(pid, pid_start, identity)

    def kill(self, pid, pid_start, identity) -> bool:
        return processes.kill(pid, pid_start, identity)

    def tree(self, identity, pid, pid_start) -> RunTree:
        return RunProcesses(identity, pid, pid_start)

    def terminate_all(self, found) -> list[Leftover]:
        return terminate_all(found)

    def kill_all(self, found) -> list[Leftover]:
        return kill_all(found)
