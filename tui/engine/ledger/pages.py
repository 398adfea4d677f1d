"""The ledger read backwards, a page at a time: the room's events history.

A room reopened after a night away shows what happened while nobody looked:
the events log scrolls back past what the engine handed over at connect, a
page of older events at a time, read from the end of `.itera/ledger.jsonl`
in blocks. Memory is bounded by the page, not by the ledger's size. Read-only
and stdlib only (the room loads no engine for it); a line that does not parse
is skipped here: the engine's own reader reports damage, this only shows.
"""

from __future__ import annotations

import json
from pathlib import Path

from .events import Event, parse

BLOCK = 64 * 1024
MAX_SCAN = 256 * 1024 * 1024  # never read more than this for one page


def events_before(path: Path, before_seq: int | None, limit: int) -> list[Event]:
    """Up to `limit` events with a seq below `before_seq` (all when None), oldest first."""
    try:
        f = open(path, "rb")
    except OSError:
        return []
    found: list[Event] = []
    with f:
        f.seek(0, 2)
        pos, tail, scanned = f.tell(), b"", 0
        while pos > 0 and len(found) < limit and scanned < MAX_SCAN:
            step = min(BLOCK, pos)
            pos -= step
            f.seek(pos)
            chunk = f.read(step) + tail
            scanned += step
            lines = chunk.split(b"\n")
            tail = lines[0] if pos > 0 else b""  # a line cut by the block: read on
            for raw in reversed(lines[1:] if pos > 0 else lines):
                ev = _event(raw)
                if ev is None or (before_seq is not None and ev.seq >= before_seq):
                    continue
                found.append(ev)
                if len(found) >= limit:
                    break
    return found[::-1]


def _event(raw: bytes) -> Event | None:
    """A line read back as its event; a line a replay would refuse is passed over (the
    ledger's report names it, not the page)."""
    raw = raw.strip()
    if not raw:
        return None
    try:
        return parse(json.loads(raw))
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
