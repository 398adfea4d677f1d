"""Start, watch and stop run processes without ever owning their lifetime.

Runs start in their own process session (`start_new_session=True`), with
stdout and stderr redirected to files (never a pipe a dead control room could
block), so quitting or killing the control room never touches training. A run
is identified by pid *and* process start time, so a reused pid is never taken
for our run after a restart, and an ended one is never taken for alive: a
zombie (on rented boxes that are containers, PID 1 often reaps nobody) has
ended, and its exit status is read from the launcher's `exit.json`.
(A run id's directory is never reused: the launcher moves the attempt on past
any directory that exists, so records of two runs never share a `metrics.jsonl`.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..reading.regular_files import read_regular
from .belonging import RunIdentity, launcher_of


ENDED = (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)  # gone, only a process-table entry left


@dataclass
class Launched:
    """A run's process: its pid and start time (its identity) and, if ours, its Popen."""
    pid: int
    pid_start: float
    popen: subprocess.Popen | None  # None when reattached after a restart


def launch(argv: list[str], env: dict[str, str], run_dir: Path, cwd: Path) -> Launched:
    run_dir.mkdir(parents=True, exist_ok=True)
    exit_file = run_dir / "exit.json"
    command = [sys.executable, "-P", "-m", "tui.engine.runs.wrapper", str(exit_file), "--", *argv]
    with open(run_dir / "stdout.log", "ab") as out, open(run_dir / "stderr.log", "ab") as err:
        popen = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 env=env, cwd=cwd, start_new_session=True, close_fds=True)
    try:
        started = psutil.Process(popen.pid).create_time()
    except psutil.Error:
        started = 0.0
    return Launched(popen.pid, started, popen)


def same_process(pid: int | None, pid_start: float | None) -> bool:
    """True if `pid` is alive and is the very process we launched (a zombie has ended)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid < 2:  # never init, never 0
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() in ENDED:
            return False
        return pid_start is None or abs(proc.create_time() - pid_start) < 0.05
    except (psutil.Error, ValueError, OverflowError, TypeError):  # no such pid, or no pid
        return False


def read_exit(run_dir: Path) -> dict | None:
    """The launcher's record of how the run ended; `exit_code` is an int or None."""
    try:
        record = json.loads(read_regular(Path(run_dir) / "exit.json", limit=1 << 16))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(record, dict):
        return None
    code = record.get("exit_code")
    if not isinstance(code, int) or isinstance(code, bool):
        record["exit_code"] = None
    return record


def signal_group(pid: int, sig: int, pid_start: float | None = None,
                 identity: RunIdentity | None = None) -> bool:
    """Signal the run's whole process group (the launcher is its leader).

    Only while `pid` is still this run's launcher, the very process (pid and start
    time) carrying this run's marks (`belonging`): a pid a ledger names is never
    enough, since a damaged line or a reused pid could name another campaign's run.
    Never group 0 (our own: the control room) or 1 (init's), whatever a pid says."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid < 2:
        return False
    if not launcher_of(pid, pid_start, identity):
        return False
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError, OverflowError):
        return False


def terminate(pid: int, pid_start: float | None, identity: RunIdentity) -> bool:
    return signal_group(pid, signal.SIGTERM, pid_start, identity)


def kill(pid: int, pid_start: float | None, identity: RunIdentity) -> bool:
    return signal_group(pid, signal.SIGKILL, pid_start, identity)
