"""Type-check one metrics record: nothing a run writes may crash the engine.

A record is a JSON object a training process wrote. Before anything reads it
(the live view, the stop rules, the conclusion), its values are checked here
once, so that `{"step": Infinity}`, `{"loss": 1e999999999}` as an int, a
`true` where a loss should be, or a line nested a hundred thousand deep are
counted as bad lines and skipped, never a traceback that kills the engine for
good (every restart would re-read the same line).

The contract, for a record that is kept:
- `t`, when present, is a finite number; `step` is an int in [0, 2**63)
  (a whole float such as `12.0` becomes 12; `null` means "no step");
- `event`, when present, is a string, and the event fields the engine reads
  (`path`, `sha256`, `ok`, `bytes`, ...) have their types;
- in a metrics record, every number fits a float; a string that spells a
  number (`"2.97"`, `"nan"`) becomes that number; for the names the campaign
  reads as numbers (`numeric`), anything else makes the record bad; other
  fields keep strings and bools as labels and lose lists and tables.
"""

from __future__ import annotations

import json

from ...campaign.numbers import STEP_LIMIT, is_finite_number, is_number, parse_number, parse_step

MAX_DEPTH = 32  # JSON nesting a record may have; a metrics record is flat

# event fields the engine reads, and the types they must have (None is always allowed)
EVENT_FIELDS = {"path": (str,), "sha256": (str,), "mode": (str,), "error": (str,),
                "problem": (str,), "ok": (bool,), "bytes": (int,),
                "write_s": (int, float), "block_s": (int, float),
                "max_abs_diff": (int, float), "steps_compared": (int,)}
BAD = None


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """True when the JSON text nests arrays/objects deeper than `limit` (strings skipped)."""
    if text.count("[") + text.count("{") <= limit:  # cannot nest deeper: no scan
        return False
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


# json.loads(text) is this scanner plus a wrapper's work per call (type tests, two
# whitespace regex matches, three Python calls): about half of its time on a short line
_scan = json.JSONDecoder().scan_once


def loads(line: str):
    """json.loads(line), for the SDK's lines: a value that fills the whole line is taken
    straight from the scanner json.loads ends in; anything else (whitespace around it,
    trailing bytes, no JSON at all) goes to json.loads, which decides and says why."""
    try:
        obj, end = _scan(line, 0)
    except StopIteration:  # no value starts the line: leading whitespace, or not JSON
        return json.loads(line)
    return obj if end == len(line) else json.loads(line)


def parse_record(line: str, numeric: frozenset = frozenset()) -> dict | None:
    """The checked record a JSONL line holds, or None (bad: count it, skip it)."""
    if too_deep(line):
        return BAD
    try:
        obj = loads(line)
    except (ValueError, RecursionError):
        return BAD
    return check_record(obj, numeric)


def check_record(obj, numeric: frozenset = frozenset()) -> dict | None:
    if obj.__class__ is not dict:
        return BAD
    is_event = "event" in obj
    out = None  # copied only when something must change
    for key, value in obj.items():
        cls = value.__class__
        if key == "t":
            if not is_finite_number(value):
                return BAD
        elif key == "step":
            if cls is int and 0 <= value < STEP_LIMIT:
                continue
            step = None if value is None else parse_step(value) if cls in (float, str) else BAD
            if step is BAD and value is not None:
                return BAD
            out = _copy(obj, out)
            if step is None:
                del out["step"]  # "no step yet" (an event before the first log)
            else:
                out["step"] = step
        elif key == "event":
            if cls is not str:
                return BAD
        elif is_event:
            types = EVENT_FIELDS.get(key)
            if types is not None:
                if value is not None and (cls not in types or not _fits(value)):
                    return BAD
            elif cls is list or cls is dict or not _fits(value):
                out = _copy(obj, out)
                del out[key]
        elif cls is float:
            continue
        elif cls is int:
            if not is_number(value):
                return BAD
        else:
            number = parse_number(value) if cls is str else None
            if number is not None:
                out = _copy(obj, out)
                out[key] = number
            elif key in numeric:
                return BAD
            elif cls is list or cls is dict:
                out = _copy(obj, out)
                del out[key]
    return obj if out is None else out


def _fits(value) -> bool:
    """Not an int too large for a float (formatting one with :g would raise)."""
    return value.__class__ is not int or is_number(value)


def _copy(obj: dict, out: dict | None) -> dict:
    return dict(obj) if out is None else out
