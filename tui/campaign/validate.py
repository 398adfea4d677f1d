"""Small typed readers that collect every problem with its key path.

The loader reads raw TOML tables through a `Reader`; each `get_*` call either
returns a clean value or records one message such as
`variant[2].category: expected mandatory|useful|exploratory, got "optional"`.
Collecting (instead of raising at the first error) lets `itera-tui check` show
a user every mistake in one pass.
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
import re
from typing import Any, Iterable

MISSING = object()


class PlanError(Exception):
    """Invalid campaign input; `problems` holds one readable line each."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def describe(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return repr(value)


COUNTING = {"count", "num", "number", "n", "nb", "total"}


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[-_ .]+", name.lower()) if w]


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice `word` most likely meant: a near spelling ("trian" -> "train"), else
    one sharing a word or a word's stem with it ("gpu_count" -> "gpus", "price" ->
    "price_usd", "num_gpus" -> "gpus"); None when nothing is close."""
    choices = [c for c in choices if isinstance(c, str)]
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return close[0]
    mine = [w for w in _words(word) if len(w) >= 3]
    found = [choice for choice in choices
             if any(w == theirs or theirs.startswith(w) or w.startswith(theirs)
                    for theirs in _words(choice) if len(theirs) >= 3 for w in mine)]
    if set(_words(word)) & COUNTING:  # "gpu_count", "num_gpu": the count, not the model
        found.sort(key=lambda c: not c.endswith("s"))
    return found[0] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    found = closest(word, choices)
    return f' (did you mean "{found}"?)' if found else ""


class Reader:
    """Reads one TOML table at `path`, recording problems in a shared list."""

    def __init__(self, table: Any, path: str, problems: list[str]):
        self.path = path
        self.problems = problems
        if not isinstance(table, dict):
            self.problem("", f"expected a table, got {describe(table)}")
            table = {}
        self.table = table
        self.seen: set[str] = set()

    def key(self, name: str) -> str:
        if not name:
            return self.path
        return f"{self.path}.{name}" if self.path else name

    def problem(self, name: str, message: str) -> None:
        self.problems.append(f"{self.key(name)}: {message}")

    def raw(self, name: str, default: Any = MISSING, required: bool = False) -> Any:
        self.seen.add(name)
        if name in self.table:
            return self.table[name]
        if required:
            self.problem(name, "required key is missing")
        return default

    def get_str(self, name: str, default: Any = MISSING, required=False, choices=None):
        value = self.raw(name, default, required)
        if value is MISSING:
            return None
        if not isinstance(value, str):
            self.problem(name, f"expected a string, got {describe(value)}")
            return None if default is MISSING else default
        if choices and value not in choices:
            self.problem(name, f"expected {'|'.join(choices)}, got {describe(value)}"
                         + did_you_mean(value, choices))
            return None if default is MISSING else default
        return value

    def get_number(self, name, default: Any = MISSING, required=False, positive=False,
                   non_negative=False):
        value = self.raw(name, default, required)
        if value is MISSING or value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.problem(name, f"expected a number, got {describe(value)}")
            return None
        if not math.isfinite(value):
            self.problem(name, f"expected a finite number, got {value}")
            return None
        if positive and not value > 0:
            self.problem(name, f"must be greater than 0, got {value}")
            return None
        if non_negative and value < 0:
            self.problem(name, f"must not be negative, got {value}")
            return None
        return float(value)

    def get_int(self, name, default: Any = MISSING, required=False, minimum=None):
        value = self.raw(name, default, required)
        if value is MISSING or value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(name, f"expected an integer, got {describe(value)}")
            return None
        if minimum is not None and value < minimum:
            self.problem(name, f"must be at least {minimum}, got {value}")
            return None
        return value

    def get_str_list(self, name, default=(), required=False) -> tuple[str, ...]:
        value = self.raw(name, MISSING, required)
        if value is MISSING:
            return tuple(default)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.problem(name, f"expected an array of strings, got {describe(value)}")
            return tuple(default)
        return tuple(value)

    def get_bool(self, name, default: Any = MISSING, required=False):
        value = self.raw(name, default, required)
        if value is MISSING:
            return None
        if not isinstance(value, bool):
            self.problem(name, f"expected true or false, got {describe(value)}")
            return None if default is MISSING else default
        return value

    def get_relative_globs(self, name) -> tuple[str, ...]:
        """An array of glob patterns relative to a run directory (watched checkpoints):
        no absolute path, no "~", no ".." part, nothing empty."""
        patterns = self.get_str_list(name)
        for i, pattern in enumerate(patterns):
            parts = pattern.replace("\\", "/").split("/")
            if not pattern.strip():
                self.problem(f"{name}[{i}]", "an empty pattern matches nothing")
            elif pattern.startswith(("/", "~")) or ".." in parts:
                self.problem(f"{name}[{i}]", f"{describe(pattern)} must be relative to the run "
                             "directory (no leading \"/\" or \"~\", no \"..\"), e.g. "
                             "\"checkpoints/*.ckpt\"")
        return patterns

    def get_datetime(self, name):
        value = self.raw(name, None)
        if value is None:
            return None
        if not isinstance(value, dt.datetime):
            self.problem(name, f"expected a TOML datetime (2026-12-01T09:00:00Z), got "
                               f"{describe(value)}")
            return None
        return value

    def get_table(self, name) -> dict | None:
        value = self.raw(name, None)
        if value is None:
            return None
        if not isinstance(value, dict):
            self.problem(name, f"expected a table, got {describe(value)}")
            return None
        return value

    def reject_unknown(self, allowed: Iterable[str]) -> None:
        allowed = list(allowed)
        for name in self.table:
            if name not in allowed:
                self.problem(name, f"unknown key{did_you_mean(name, allowed)}")

    def duration_hours(self, required=True, allow_days=False, field_names=None) -> float | None:
        """One of hours/minutes (and days for lots), converted to hours, > 0."""
        units = {"hours": 1.0, "minutes": 1 / 60}
        if allow_days:
            units["days"] = 24.0
        given = [(n, f) for n, f in units.items() if n in self.table]
        for n in units:
            self.seen.add(n)
        if not given:
            if required:
                self.problem("", f"needs a duration: one of {', '.join(units)}")
            return None
        if len(given) > 1:
            self.problem("", f"give only one of {', '.join(n for n, _ in given)}")
            return None
        name, factor = given[0]
        value = self.get_number(name, positive=True)
        return None if value is None else value * factor
