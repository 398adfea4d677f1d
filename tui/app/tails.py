"""The last lines of a run's stdout and stderr, read from the end of the file only.

A run may print gigabytes over days; the run screen needs its last few lines.
Only the final `max_bytes` are read (one seek, one read), decoded leniently,
and cleaned for a terminal: carriage-return progress bars keep their last
state, escape sequences and other control characters are made visible
(`for_terminal`). Called
from a worker thread, never the UI thread; a missing or unreadable file is an
empty tail with a note, never an exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..campaign.text import for_terminal

TAIL_BYTES = 64 * 1024
TAIL_LINES = 200
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # SGR colours: dropped; every other escape shown


@dataclass(frozen=True)
class Tail:
    lines: tuple[str, ...]
    size: int  # bytes in the whole file
    note: str | None = None  # 'no file yet', 'unreadable: ...'


def clean(line: str) -> str:
    line = line.rstrip("\r")
    if "\r" in line:  # a progress bar redrawn in place: its last state
        line = line.rsplit("\r", 1)[-1]
    return for_terminal(_COLOUR.sub("", line))  # an escape sequence is shown, never sent to the terminal


def read_tail(path: Path, max_lines: int = TAIL_LINES, max_bytes: int = TAIL_BYTES) -> Tail:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            start = max(0, size - max_bytes)
            f.seek(start)
            data = f.read(max_bytes)
    except FileNotFoundError:
        return Tail((), 0, "no file yet")
    except OSError as exc:
        return Tail((), 0, f"unreadable: {exc.strerror or exc}")
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if start > 0:
        lines = lines[1:]  # the first line was cut by the seek
    if lines and lines[-1] == "":
        lines = lines[:-1]
    return Tail(tuple(clean(x) for x in lines[-max_lines:]), size)
