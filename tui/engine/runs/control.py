"""The engine's side of the run protocol's control file (`ITERA_CONTROL`).

Requests (checkpoint, stop) are appended as numbered JSON lines and fsync'ed,
so a run sees each request once, in order, even across a control-room
restart: the sequence continues from the lines already in the file. Each
request carries the wall-clock time, never the engine's injected clock: the
run compares it with its own process start to ignore requests meant for an
earlier attempt. The run owns the file: one that is not a regular file (a
FIFO would block the engine's open) is not written, and `refused` says why.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..reading.regular_files import append_regular, open_regular


class ControlFiles:
    def __init__(self, runs_dir: Path):
        self.runs_dir = Path(runs_dir)
        self._seq: dict[str, int] = {}
        self.refused: dict[str, str] = {}  # run id -> why its control file cannot be written

    def _path(self, rid: str) -> Path:
        return self.runs_dir / rid / "control.jsonl"

    def write(self, rid: str, request: str) -> int:
        """Append one request; returns its sequence number."""
        seq = self._seq.get(rid)
        if seq is None:
            seq = _count_lines(self._path(rid))
        seq += 1
        self._seq[rid] = seq
        # the box's real wall clock, never the engine's injected one: the run's SDK, in
        # another process, ignores a request stamped before the run started
        line = json.dumps({"seq": seq, "request": request, "t": time.time()}) + "\n"
        try:
            append_regular(self._path(rid), line.encode(), fsync=True)
        except OSError as exc:  # the run's own doing (a FIFO, a directory): it cannot be
            self.refused[rid] = f"control file: {exc.strerror or exc}"  # asked; signals still work
        return seq


def _count_lines(path: Path) -> int:
    try:
        fd = open_regular(path)
    except OSError:
        return 0
    with os.fdopen(fd, "rb") as f:
        return sum(1 for _ in f)
