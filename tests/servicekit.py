"""Helpers for tests that start the engine as its own process: find it, end it by pid.

Every test that starts a detached engine (through `itera-tui`, `engine start` or
`connect`) ends it with `end_engine(root)` in a `finally`, whatever the outcome:
the supervisor and the engine are found by their command line (`tui.service.daemon`
and the campaign's path), then the runs by the ledger.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil

from conftest import REPO
from enginekit import wait_for


def engine_processes(root: Path) -> list[psutil.Process]:
    """The campaign's supervisors and engines, supervisors first (so none restarts an
    engine the caller is ending): by the campaign's path on the command line, or, for
    one started as `supervise campaign.toml` in its folder (a far box's), by its cwd."""
    out = []
    needle = str(Path(root).absolute())
    folder = os.path.realpath(root)
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info.get("cmdline") or []
        if not any("tui.service.daemon" in part for part in cmd):
            continue
        try:
            cwd = os.path.realpath(proc.cwd())
        except (psutil.Error, OSError):
            cwd = ""
        if any(needle in part for part in cmd) or cwd == folder \
                or cwd.startswith(folder + os.sep):
            out.append(proc)
    return sorted(out, key=lambda p: "supervise" not in (p.info.get("cmdline") or []))


def engine_pids(root: Path, role: str = "engine") -> list[int]:
    return [p.pid for p in engine_processes(root)
            if role in (p.info.get("cmdline") or [])]


def end_engine(root: Path) -> None:
    """Kill the supervisor, the engine and every run the ledger names."""
    for proc in engine_processes(root):
        try:
            proc.kill()
        except psutil.Error:
            pass
    ledger = Path(root) / ".itera" / "ledger.jsonl"
    if ledger.exists():
        from tui.engine import read_ledger, replay

        for run in replay(read_ledger(ledger)).runs:
            if run.pid:
                try:
                    os.killpg(run.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass


def kill_box(root: Path) -> None:
    """SIGKILL everything of the campaign in `root` (a box that dies): its supervisor and
    engine, the runs its ledger names, and any process naming the folder on its command
    line (a verifier, a headless engine)."""
    end_engine(root)
    needle = str(root)
    for proc in psutil.process_iter(["cmdline"]):
        if any(needle in part for part in proc.info.get("cmdline") or []):
            try:
                proc.kill()
            except psutil.Error:
                pass


def wait_until(cond, timeout: float = 60.0, what: str = "condition", every: float = 0.1):
    """The one wait (enginekit.wait_for), with the longer default an engine start needs."""
    return wait_for(cond, timeout, what, every)


def env_with(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env
