"""Tail a run's metrics: the SDK's JSONL file, or stdout through regexes.

A training process appends while we read. A line is parsed only once its
newline has arrived (a torn last line is waited for, never parsed half), a bad
line is counted and skipped, and a file that does not exist yet is simply
empty. Offsets are kept so each poll reads only what is new.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

MAX_READ = 8 << 20  # bound one poll's work; the rest is read next poll


class LineTail:
    """New complete lines of a growing file since the last poll."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.offset = 0
        self._partial = b""

    def poll(self) -> list[bytes]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(MAX_READ)
        except FileNotFoundError:
            return []
        if not data:
            return []
        self.offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()  # b"" when data ended with a newline
        return lines


class JsonlFeed:
    """Metrics records from the SDK's JSONL file."""

    def __init__(self, path: Path):
        self.tail = LineTail(path)
        self.bad_lines = 0
        self.records = 0

    def poll(self) -> list[dict]:
        out = []
        for raw in self.tail.poll():
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except ValueError:
                self.bad_lines += 1
                continue
            if not isinstance(record, dict):
                self.bad_lines += 1
                continue
            out.append(record)
        self.records += len(out)
        return out


def parse_number(text: str) -> float | None:
    """float() with the spellings training scripts print: nan, NaN, inf, -Infinity."""
    try:
        return float(text.strip().rstrip(",;"))
    except ValueError:
        return None


class StdoutFeed:
    """Records from a script that only prints, through the `[metrics]` regexes.

    Each line that matches at least one pattern gives one record; `step` is
    taken from a `step` pattern when there is one.
    """

    def __init__(self, path: Path, patterns: tuple[tuple[str, str], ...]):
        self.tail = LineTail(path)
        self.patterns = [(name, re.compile(p)) for name, p in patterns]
        self.records = 0
        self.bad_lines = 0

    def poll(self) -> list[dict]:
        out = []
        if not self.patterns:
            return out
        for raw in self.tail.poll():
            line = raw.decode("utf-8", "replace")
            record: dict = {}
            for name, rx in self.patterns:
                m = rx.search(line)
                if m is None:
                    continue
                value = parse_number(m.group(1))
                if value is None:
                    self.bad_lines += 1
                    continue
                record[name] = int(value) if name == "step" and math.isfinite(value) else value
            if record:
                record["source"] = "stdout"
                out.append(record)
        self.records += len(out)
        return out
