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
    """New complete lines of a growing file since the last poll (decoded text)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.offset = 0
        self._partial = b""

    def poll(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(MAX_READ)
        except FileNotFoundError:
            return []
        if not data:
            return []
        self.offset += len(data)
        complete, newline, partial = (self._partial + data).rpartition(b"\n")
        if not newline:  # no complete line yet: wait for the rest
            self._partial = partial
            return []
        self._partial = partial
        # decode once per poll (not per line): cuts json's per-call encoding sniffing
        return complete.decode("utf-8", "replace").split("\n")


class JsonlFeed:
    """Metrics records from the SDK's JSONL file."""

    def __init__(self, path: Path):
        self.tail = LineTail(path)
        self.bad_lines = 0
        self.records = 0

    def poll(self) -> list[dict]:
        out = []
        loads = json.loads
        append = out.append
        for raw in self.tail.poll():
            try:
                record = loads(raw)
            except ValueError:
                if raw.strip():
                    self.bad_lines += 1
                continue
            if record.__class__ is not dict:
                self.bad_lines += 1
                continue
            append(record)
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
        for line in self.tail.poll():
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


def recorded_sources(run_dir: Path, patterns) -> list[list[dict]]:
    """All records a run has written, per source: [SDK JSONL, stdout via regexes].

    For reading a run after the fact (estimates, conclusion, the bundle's
    curves); the live engine tails the same files incrementally instead.
    """
    out = []
    for feed in (JsonlFeed(Path(run_dir) / "metrics.jsonl"),
                 StdoutFeed(Path(run_dir) / "stdout.log", patterns)):
        records: list[dict] = []
        while batch := feed.poll():
            records.extend(batch)
        out.append(records)
    return out
