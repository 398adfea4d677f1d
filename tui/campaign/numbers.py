"""One answer to "is this a usable number?" for the whole code base.

Metrics records, ledger events and manifests come from files a run or a bad
day may have damaged: a bool is not a number, NaN and infinities are not
finite, and anything else (a string, None, a list) is not a number at all.
"""

from __future__ import annotations

import math


def is_number(value) -> bool:
    """An int or float, not a bool (JSON true would otherwise count as 1)."""
    return (value.__class__ is int or value.__class__ is float
            or (isinstance(value, (int, float)) and not isinstance(value, bool)))


def is_finite_number(value) -> bool:
    if value.__class__ is float:
        return math.isfinite(value)
    if value.__class__ is int:
        return True
    return is_number(value) and math.isfinite(value)
