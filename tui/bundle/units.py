"""Durations as a person reads them: `42 s`, `20 min`, `5.2 h`, `2 d 3 h`.

The report is read by the person who rented the box, not parsed: a figure
like `0.333333 h` or `0.0138889 days` (Python's `:g`) makes them do the sums.
One function, so every duration of the report is written the same way.
"""

from __future__ import annotations

import math


def duration(hours: float | None) -> str:
    """Hours as the largest unit that reads well, at most 3 significant digits."""
    if hours is None or not math.isfinite(hours):
        return "-"
    seconds = max(0.0, hours * 3600.0)
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 9.5 else f"{seconds:.2g} s"
    if seconds < 3600 - 30:
        minutes = seconds / 60
        return f"{minutes:.2g} min" if minutes < 9.5 else f"{minutes:.0f} min"
    if hours < 48:
        return f"{hours:.3g} h" if hours < 9.995 else f"{hours:.1f}".rstrip("0").rstrip(".") + " h"
    days, rest = divmod(round(hours), 24)
    return f"{days} d {rest} h" if rest else f"{days} d"


def seconds(value: float | None) -> str:
    return duration(None if value is None else value / 3600.0)
