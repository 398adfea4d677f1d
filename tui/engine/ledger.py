"""The append-only ledger: every fact of a campaign, one fsync'ed JSON line each.

The ledger is the campaign's memory. State is never stored anywhere else: it is
`replay(ledger)`, so a control room killed with -9 and started again rebuilds
exactly what it knew. A torn last line (a crash in the middle of a write) is
ignored on read and never parsed half; the next append starts on a new line.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Callable


class Ledger:
    def __init__(self, path: Path, clock: Callable[[], float]):
        self.path = Path(path)
        self.clock = clock
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_torn_tail()
        self._seq = len(read_ledger(self.path))

    def _repair_torn_tail(self) -> None:
        """Cut a torn last line so the next event does not glue onto it."""
        if not self.path.exists():
            return
        with open(self.path, "rb+") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                cut = data.rfind(b"\n") + 1
                f.truncate(cut)
                f.flush()
                os.fsync(f.fileno())

    def append(self, event: str, **fields) -> dict:
        clash = {"seq", "t", "event"} & set(fields)
        if clash:  # a field named seq once renumbered the ledger: never again
            raise ValueError(f"ledger fields cannot be named {sorted(clash)}")
        with self._lock:
            self._seq += 1
            record = {"seq": self._seq, "t": round(self.clock(), 3), "event": event, **fields}
            line = json.dumps(record, sort_keys=False, default=str) + "\n"
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            return record


def read_ledger(path: Path) -> list[dict]:
    """All complete events; a torn or corrupt line is skipped, never half-parsed."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    events = []
    for raw in data.split(b"\n")[:-1]:  # the part after the last newline is torn
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict) and "event" in record:
            events.append(record)
    return events
