"""Whether a process is this campaign's run: by run id, run directory and campaign folder.

A run id is a variant, a config hash and an attempt, so two copies of one
campaign on a shared box (a second folder, a colleague's checkout) have the
very same ids. A process is a run's only when all three marks match: its
`ITERA_RUN_ID`, its `ITERA_RUN_DIR` (resolved: the run directory lies inside
the campaign folder's `.itera/runs`), and, for the launcher the engine
starts, its working directory, which is the campaign folder (the launcher
never changes it). The marks are read from /proc through psutil; a process
whose marks cannot be read (another user's, gone, a zombie) belongs to
nobody, so the engine never signals it. One home for the rule: finding a run
after a restart, signalling a run's group and ending its leftovers all ask
here first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import psutil


def _real(path) -> str:
    return os.path.realpath(str(path))


@dataclass(frozen=True)
class RunIdentity:
    """The three marks of one run of one campaign (paths resolved)."""

    run_id: str
    run_dir: str
    campaign_dir: str

    @classmethod
    def of(cls, run_id: str, run_dir: Path, campaign_dir: Path) -> "RunIdentity":
        return cls(run_id, _real(run_dir), _real(campaign_dir))

    def inside_campaign(self) -> bool:
        """The run directory lies in the campaign folder (always, as the engine lays it out)."""
        return os.path.commonpath([self.run_dir, self.campaign_dir]) == self.campaign_dir


def marked(proc: psutil.Process, identity: RunIdentity) -> bool:
    """The process carries this run's environment: its run id and its run directory."""
    try:
        env = proc.environ()
    except (psutil.Error, OSError):
        return False
    run_dir = env.get("ITERA_RUN_DIR")
    return (env.get("ITERA_RUN_ID") == identity.run_id and bool(run_dir)
            and _real(run_dir) == identity.run_dir and identity.inside_campaign())


def is_launcher(proc: psutil.Process, identity: RunIdentity) -> bool:
    """The run's launcher: marked, leading its own group, and working in the campaign folder."""
    try:
        if proc.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return False
        if os.getpgid(proc.pid) != proc.pid or _real(proc.cwd()) != identity.campaign_dir:
            return False
    except (psutil.Error, OSError):
        return False
    return marked(proc, identity)


def launcher_of(pid, pid_start, identity: RunIdentity | None) -> bool:
    """`pid` is still this run's launcher: the same process (pid and start time) and its
    marks match. The check before any signal to the run's process group."""
    if identity is None or not isinstance(pid, int) or isinstance(pid, bool) or pid < 2:
        return False
    try:
        proc = psutil.Process(pid)
        if pid_start is not None and abs(proc.create_time() - pid_start) >= 0.05:
            return False
    except (psutil.Error, OSError, ValueError, OverflowError, TypeError):
        return False
    return is_launcher(proc, identity)


def find_launcher(identity: RunIdentity) -> psutil.Process | None:
    """The live launcher of this run, if one runs (after a restart that lost its record)."""
    for proc in psutil.process_iter():
        if is_launcher(proc, identity):
            return proc
    return None
