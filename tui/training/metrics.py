"""Appends metric and event records to the run's JSONL metrics file.

The engine tails this file to draw curves and fire stop rules, so every record
is one complete line written with a single ``write`` on an O_APPEND descriptor
(no torn lines from our side, even with the async checkpoint thread writing
acks). Values are coerced to JSON (tensors and numpy scalars via ``.item()``);
NaN and Infinity are written as Python's json writes them, because a stop rule
needs to see them. A metrics file that cannot be written never stops training:
one warning on stderr, then records are dropped.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
from pathlib import Path


def to_plain(value):
    """A JSON-friendly version of a metric value (scalars from tensors/numpy)."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", 0) == 0:
        try:
            return item()
        except (TypeError, ValueError, RuntimeError):
            pass
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    return value


def non_finite_names(values: dict) -> list[str]:
    return [name for name, value in values.items()
            if isinstance(value, float) and not math.isfinite(value)]


def _json_default(value):
    plain = to_plain(value)
    if plain is not value:
        return plain
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


class MetricsWriter:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._failed = False

    def write(self, record: dict) -> None:
        data = (json.dumps(record, default=_json_default) + "\n").encode()
        with self._lock:
            if self._failed:
                return
            try:
                if self._fd is None:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view):]
            except OSError as error:
                self._failed = True
                print(f"itera training: cannot write metrics to {self.path}: {error}; "
                      "metrics from now on are dropped", file=sys.stderr)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
