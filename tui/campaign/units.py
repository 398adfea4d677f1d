"""Durations the way a person reads them: `45 s`, `11 min`, `5 h 07 min`, `2 d 3 h`.

One formatter for every text a person reads (status, headless, report, the
control room), so a window is never `0.333333 h` in one place and `20m` in
another. At most two units; the second is dropped when it is zero.
"""

from __future__ import annotations

import math


def human_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "—"
    sign = "-" if seconds < 0 else ""
    s = int(abs(seconds) + 1e-6)  # truncated: a countdown never rounds up; 1/3 h is 20 min
    days, rest = divmod(s, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{sign}{days} d" + (f" {hours} h" if hours else "")
    if hours:
        return f"{sign}{hours} h" + (f" {minutes:02d} min" if minutes else "")
    if minutes:
        return f"{sign}{minutes} min"
    return f"{sign}{secs} s"


def human_hours(hours: float | None) -> str:
    return "—" if hours is None else human_duration(hours * 3600.0)
