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


def exact_duration(seconds: float) -> str:
    """To the second, every unit down from the largest: `1 min 43 s`, `1 h 00 min 05 s`."""
    sign = "-" if seconds < 0 else ""
    s = int(abs(seconds) + 1e-6)
    days, rest = divmod(s, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{sign}{days} d {hours} h {minutes:02d} min {secs:02d} s"
    if hours:
        return f"{sign}{hours} h {minutes:02d} min {secs:02d} s"
    if minutes:
        return f"{sign}{minutes} min {secs:02d} s"
    return f"{sign}{secs} s"


def precise_hours(hours: float | None) -> str:
    """A duration a sentence states as measured: to the second under an hour (a
    campaign that ran 2 min 54 s did not use "2 min"), in human units above."""
    if hours is None or not math.isfinite(hours) or abs(hours) >= 1:
        return human_hours(hours)
    return exact_duration(hours * 3600.0)


def told_apart(a_s: float, b_s: float) -> tuple[str, str]:
    """Two durations a sentence compares ("took A for B planned (+72%)"), each in human
    units, or both to the second where the human ones would read the same although
    the durations differ: a difference is never shown as `1 min for 1 min`."""
    one, two = human_duration(a_s), human_duration(b_s)
    if one != two or int(abs(a_s) + 1e-6) == int(abs(b_s) + 1e-6):
        return one, two
    return exact_duration(a_s), exact_duration(b_s)


def human_hours(hours: float | None) -> str:
    return "—" if hours is None else human_duration(hours * 3600.0)


def lot_text(gpu: str | None, hours: float, price_usd: float) -> str:
    """A rented lot as a person reads it: its span and its price for the whole of it
    (a lot is sold whole, "RTX 4090 lot of 3 d for 47.14 USD"; never a rate by the hour)."""
    return f"{gpu + ' ' if gpu else ''}lot of {human_hours(hours)} for {price_usd:.2f} USD"


DEFAULT_RESERVE_HOURS = 0.25
RESERVE_SHARE = 0.05


def default_reserve_hours(window_hours: float) -> float:
    """The wrap-up's and the retrieval's reserve when the plan names none: 15 minutes,
    or 5% of the window when that is less (a 20-minute window reserves 1 minute each)."""
    return min(DEFAULT_RESERVE_HOURS, RESERVE_SHARE * window_hours) if window_hours > 0 \
        else DEFAULT_RESERVE_HOURS


def short_hours(hours: float) -> str:
    """`45 s`, `4.5 min`, `38 min`, `2.3 h`: the unit that suits the size, one per figure,
    so a line of figures never mixes `-0.0 h` with minutes."""
    minutes = hours * 60
    if abs(minutes) < 1:
        return f"{hours * 3600:.0f} s"
    if abs(minutes) < 10:
        return f"{minutes:.1f} min"
    if abs(hours) < 1:
        return f"{minutes:.0f} min"
    return f"{hours:.1f} h"


def signed_hours(hours: float) -> str:
    """A slack or a difference: `+13 min`, `-1.2 min`, `+0 s`."""
    text = short_hours(abs(hours))
    zero = not any(ch in "123456789" for ch in text)
    return ("-" if hours < 0 and not zero else "+") + text
