"""The value kinds a ledger field may hold, as predicates with the words that name them.

An event's field types (`events.py`) say what each field holds; a few need more
than a Python type can say (a time that `time.localtime` can show, a process id
Linux can have, a step that may be NaN). Those are written `Annotated[float, TIME]`
beside the field, and the checks a ledger line must pass are derived from the
annotations, so no table of fields stands beside the event classes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Kind:
    """A field type: a predicate and the words that name it in a damage report."""

    what: str
    accepts: Callable[[object], bool]

    def check(self, value, nullable: bool = False) -> bool:
        return (value is None and nullable) or (value is not None and self.accepts(value))


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_finite(v) -> bool:
    return is_number(v) and math.isfinite(v)


def is_str_list(v) -> bool:
    return isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)


def is_str_map(v) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str)
                                       for k, x in v.items())


def is_time(v) -> bool:
    """Seconds since 1970 that time.localtime can show (1e300 is finite, not a time)."""
    return is_finite(v) and 0 <= v < 1e11


def is_pid(v) -> bool:
    """A process id (0 is no process; tui.engine.runs.processes never signals 0 or 1 either)."""
    return is_int(v) and 1 <= v <= 2**22  # Linux's PID_MAX_LIMIT


def is_config(v) -> bool:
    """A run's resolved configuration: the bundle reads its params as a table."""
    return (isinstance(v, dict) and isinstance(v.get("params", {}), dict)
            and is_str_list(v.get("argv", [])))


def is_pilot(v) -> bool:
    """The pilot figures the decision screen shows: variant -> {state, stop, step, ...}."""
    def figures(f) -> bool:
        return (isinstance(f, dict) and isinstance(f.get("state", ""), str)
                and isinstance(f.get("stop") or {}, dict)
                and all(f.get(k) is None or is_number(f.get(k))
                        for k in ("metric", "last_loss", "step")))
    return isinstance(v, dict) and all(figures(f) for f in v.values())


def one_of(*values: str) -> Kind:
    return Kind("one of " + "|".join(values), lambda v: isinstance(v, str) and v in values)


STR = Kind("a string", lambda v: isinstance(v, str))
INT = Kind("an integer", is_int)
FINITE = Kind("a finite number", is_finite)
TIME = Kind("a time (seconds since 1970)", is_time)
PID = Kind("a process id", is_pid)
CONFIG = Kind("a run configuration (params a table, argv a list of strings)", is_config)
PILOT = Kind("pilot figures (variant -> figures)", is_pilot)
NUMBER = Kind("a number", is_number)  # a rule's step may be a float, even nan
BOOL = Kind("true or false", lambda v: isinstance(v, bool))
STR_LIST = Kind("a list of strings", is_str_list)
STR_MAP = Kind("a table of strings", is_str_map)
SCALAR = Kind("a number, string or boolean", lambda v: isinstance(v, (int, float, str)))
PROCESSES = Kind("a list of process records",
                 lambda v: isinstance(v, (list, tuple))
                 and all(isinstance(p, dict) and is_pid(p.get("pid")) for p in v))
TABLE = Kind("a table", lambda v: isinstance(v, dict))


def shown(value) -> str:
    """A field's value in a damage report: short, and never a recursion on a deep one."""
    try:
        text = repr(value)
    except RecursionError:
        text = f"a deeply nested {type(value).__name__}"
    return text if len(text) <= 40 else text[:37] + "..."
