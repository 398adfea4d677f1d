"""Start, watch and stop run processes without ever owning their lifetime.

Runs start in their own process session (`start_new_session=True`), with
stdout and stderr redirected to files (never a pipe a dead control room could
block), so quitting or killing the control room never touches training. A run
is identified by pid *and* process start time, so a reused pid is never taken
for our run after a restart.
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


@dataclass
class Launched:
    pid: int
    pid_start: float
    popen: subprocess.Popen | None  # None when reattached after a restart


def launch(argv: list[str], env: dict[str, str], run_dir: Path, cwd: Path) -> Launched:
    run_dir.mkdir(parents=True, exist_ok=True)
    exit_file = run_dir / "exit.json"
    command = [sys.executable, "-m", "tui.engine.launch", str(exit_file), "--", *argv]
    with open(run_dir / "stdout.log", "ab") as out, open(run_dir / "stderr.log", "ab") as err:
        popen = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 env=env, cwd=cwd, start_new_session=True, close_fds=True)
    try:
        started = psutil.Process(popen.pid).create_time()
    except psutil.Error:
        started = 0.0
    return Launched(popen.pid, started, popen)


def same_process(pid: int | None, pid_start: float | None) -> bool:
    """True if `pid` is alive and is the very process we launched."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return pid_start is None or abs(proc.create_time() - pid_start) < 0.05
    except psutil.Error:
        return False


def read_exit(run_dir: Path) -> dict | None:
    try:
        return json.loads((run_dir / "exit.json").read_text())
    except (FileNotFoundError, ValueError):
        return None


def signal_group(pid: int, sig: int) -> bool:
    """Signal the run's whole process group (the launcher is its leader)."""
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def terminate(pid: int) -> bool:
    return signal_group(pid, signal.SIGTERM)


def kill(pid: int) -> bool:
    return signal_group(pid, signal.SIGKILL)
