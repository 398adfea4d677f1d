"""Temporary files beside their final name, and the sweep of those dead writers left.

An atomic write goes to ``.<name>.tmp-<pid>-<random>`` in the final file's own
directory (so the rename stays on one filesystem). A writer killed mid-write
leaves that file behind; the next writer in the directory removes the ones whose
process is gone. Directory fsyncs make the renames themselves durable.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def remove_stale_temps(directory: Path) -> None:
    """Delete the temp files (``.<name>.tmp-<pid>-<hex>``) that processes which
    died mid-write left in `directory`."""
    try:
        entries = list(directory.iterdir())
    except OSError:
        return
    for entry in entries:
        head, sep, tail = entry.name.partition(".tmp-")
        if not (sep and head.startswith(".")):
            continue
        pid_text = tail.split("-", 1)[0]
        if pid_text.isdigit() and int(pid_text) != os.getpid() and not _pid_alive(int(pid_text)):
            try:
                entry.unlink()
            except OSError:
                pass


_swept: set[Path] = set()


def sweep_once(directory: Path) -> None:
    """remove_stale_temps once per directory and process: a dead writer's temp
    files predate this process (one process writes a run's checkpoints), and a
    listing of a big directory is not free on every save."""
    if directory not in _swept:
        _swept.add(directory)
        remove_stale_temps(directory)
