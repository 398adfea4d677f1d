"""One answer to "is this a usable number?" for the whole code base.

Metrics records, ledger events and manifests come from files a run or a bad
day may have damaged, and printed text spells numbers the way real code
prints them. A bool is not a number (JSON `true` must never become a loss of
1.0), an int too large for a float is not one either (`float(10**400)`
raises), NaN and infinities are numbers but not finite, and anything else (a
string, None, a list) is not a number at all. Printed spellings: `nan.0`
(Lightning), `'2.97'` (transformers), `tensor(2.31)` (a printed torch
scalar), `-Infinity` (JSON). This module is the only place those checks and
spellings live; it imports nothing but math and sys.
"""

from __future__ import annotations

import math
import sys

FLOAT_MAX_INT = int(sys.float_info.max)  # ints beyond this cannot become a float
STEP_LIMIT = 2 ** 63  # a step is a non-negative int64
_QUOTES = "'\"`"
_TRAILING = ",;:)]}%'\"`"


def is_number(value) -> bool:
    """An int or float that a float can hold (NaN and infinities included); no bool."""
    cls = value.__class__
    if cls is float:
        return True
    if cls is int:
        return -FLOAT_MAX_INT <= value <= FLOAT_MAX_INT
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, float) or -FLOAT_MAX_INT <= value <= FLOAT_MAX_INT


def is_finite_number(value) -> bool:
    """A number (see `is_number`) that is neither NaN nor infinite."""
    cls = value.__class__
    if cls is float:
        return math.isfinite(value)
    if cls is int:
        return -FLOAT_MAX_INT <= value <= FLOAT_MAX_INT
    return is_number(value) and math.isfinite(value)


def parse_number(text: str) -> float | None:
    """The float a printed value means, or None when it is not a number.

    Reads plain floats and ints, exponents (`2.31e+00`, `1e309` = inf), every
    spelling of the non-finite values (`nan`, `NaN`, `nan.0`, `inf`, `inf.0`,
    `-Infinity`), quoted values (`'2.97'`, `"2.97"`), torch scalars
    (`tensor(2.31)`, `tensor(nan, device='cuda:0')`) and trailing
    punctuation a regex may capture (`0.41,` `0.41]` `1.23%`).
    """
    if text.__class__ is not str:
        return None
    try:
        return float(text)  # the common case: one C call
    except ValueError:
        pass
    t = text.strip().strip(_QUOTES)
    if t.startswith("tensor("):
        t = t[7:].split(",", 1)[0].strip()
    t = t.rstrip(_TRAILING).strip().strip(_QUOTES)
    low = t.lower()
    if low.endswith(".0") and low.lstrip("+-") in ("nan.0", "inf.0", "infinity.0"):
        t = t[:-2]  # Lightning's bar prints nan as nan.0
    try:
        return float(t)
    except ValueError:
        return None


def parse_step(text) -> int | None:
    """A printed or recorded step as an int in [0, 2**63), or None."""
    if text.__class__ is int:
        return text if 0 <= text < STEP_LIMIT else None
    if text.__class__ is str:
        t = text.strip().rstrip(_TRAILING)
        if t.isascii() and t.isdigit():  # exact (a float would round past 2**53)
            return int(t) if len(t) < 20 and int(t) < STEP_LIMIT else None
        value = parse_number(t)
    elif text.__class__ is float:
        value = text
    else:
        return None
    if value is None or not math.isfinite(value) or value != int(value):
        return None
    step = int(value)
    return step if 0 <= step < STEP_LIMIT else None
