"""Reads the engine's requests (checkpoint now, stop) from the run's control file.

The engine appends one JSON object per line and may be caught mid-write, so a
line is only parsed once its newline has arrived. Training calls this every
step, so the file is stat'ed at most every ``interval`` seconds and only the new
bytes are read. Requests are de-duplicated by their ``seq``; requests stamped
before this attempt was launched belong to an earlier one and are ignored (a
resumed run must not obey the "stop" that ended its predecessor).

The attempt's launch is `ITERA_LAUNCHED_AT`, stamped by the engine with the
same wall clock as its requests, never this process's own start: the script is
a grandchild of the engine (its launcher, or torchrun's agent, starts it
seconds later on a busy box), and a checkpoint asked in those seconds is meant
for this attempt. Only a script started by hand, with no launch stamp, falls
back to its own start.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

POLL_INTERVAL_S = 0.5
_STALE_MARGIN_S = 1.0


def process_start_time() -> float | None:
    """Wall-clock start of this process (Linux /proc), or None when unknown."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


class ControlReader:
    def __init__(self, path: Path | None, *, ignore_before: float | None = None,
                 interval: float = POLL_INTERVAL_S, clock=time.monotonic) -> None:
        self.path = path
        self.ignore_before = ignore_before
        self.interval = interval
        self.bad_lines = 0
        self.pending_checkpoint: int | None = None  # seq of an untaken request (-1: no seq)
        self.stop_seq: int | None = None
        self._clock = clock
        self._last_poll = float("-inf")
        self._offset = 0
        self._inode: int | None = None
        self._partial = b""
        self._last_seq: int | None = None

    @classmethod
    def for_this_process(cls, path: Path | None, launched_at: float | None = None) -> "ControlReader":
        start = launched_at if launched_at is not None else process_start_time()
        return cls(path, ignore_before=None if start is None else start - _STALE_MARGIN_S)

    def poll(self, force: bool = False) -> None:
        if self.path is None:
            return
        now = self._clock()
        if not force and now - self._last_poll < self.interval:
            return
        self._last_poll = now
        try:
            info = os.stat(self.path)
        except OSError:
            return
        if info.st_ino != self._inode or info.st_size < self._offset:
            self._inode, self._offset, self._partial = info.st_ino, 0, b""
        if info.st_size == self._offset:
            return
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read(info.st_size - self._offset)
        except OSError:
            return
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()  # b"" after a complete line, else a torn line
        for line in lines:
            self._handle(line)

    def _handle(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            record = json.loads(line)
        except ValueError:
            self.bad_lines += 1
            return
        if not isinstance(record, dict):
            self.bad_lines += 1
            return
        seq = record.get("seq")
        seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else None
        if seq is not None:
            if self._last_seq is not None and seq <= self._last_seq:
                return
            self._last_seq = seq
        stamp = record.get("t")
        if self.ignore_before is not None and isinstance(stamp, (int, float)) and stamp < self.ignore_before:
            return
        request = record.get("request")
        if request == "checkpoint":
            self.pending_checkpoint = -1 if seq is None else seq
        elif request == "stop":
            self.stop_seq = -1 if seq is None else seq
        else:
            self.bad_lines += 1

    def take_checkpoint_request(self) -> int | None:
        """The seq of the pending checkpoint request (None if none or unnumbered); clears it."""
        seq, self.pending_checkpoint = self.pending_checkpoint, None
        return None if seq is None or seq < 0 else seq
