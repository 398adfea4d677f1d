"""Short, calm text for numbers the control room shows: durations, ages, sizes.

Every panel formats time and bytes the same way, so the helpers live here
(pure stdlib, no textual) and are unit-tested directly.
"""

from __future__ import annotations

import math
import time


def duration(seconds: float | None) -> str:
    """'2d04h', '47h12m', '12m', '45s' — at most two units, never negative zero."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    sign = "-" if seconds < 0 else ""
    s = int(abs(seconds))
    days, rest = divmod(s, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{sign}{days}d{hours:02d}h"
    if hours:
        return f"{sign}{hours}h{minutes:02d}m"
    if minutes:
        return f"{sign}{minutes}m"
    return f"{sign}{secs}s"


def hours(h: float | None) -> str:
    """Signed hours for slack: '+18.0 h', '-6.0 h', '+45 min'."""
    if h is None or not math.isfinite(h):
        return "—"
    if abs(h) < 1:
        return f"{h * 60:+.0f} min"
    return f"{h:+.1f} h"


def local_clock(t: float | None, with_day: bool = True) -> str:
    if t is None:
        return "—"
    return time.strftime("%a %H:%M" if with_day else "%H:%M", time.localtime(t))


def utc_clock(t: float | None) -> str:
    if t is None:
        return "—"
    return time.strftime("%H:%M UTC", time.gmtime(t))


def event_clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def gib(n: int | float | None) -> str:
    if n is None:
        return "N/A"
    g = n / 2**30
    return f"{g:.0f}G" if g >= 100 else f"{g:.1f}G"


def number(x) -> str:
    """A metric value: 4 significant digits; nan/inf spelled out; None as '—'."""
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if not math.isfinite(x):
        return str(x)
    return f"{x:.4g}"


def pct(x: float | None) -> str:
    return "N/A" if x is None else f"{x:.0f}%"


def clip(text: str, width: int) -> str:
    """Cut to width with an ellipsis when something was cut."""
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def bar(fraction: float | None, width: int) -> str:
    """A progress bar of `width` cells with eighth-blocks: '███▌    '."""
    if width <= 0:
        return ""
    if fraction is None:
        return "·" * width
    fraction = min(1.0, max(0.0, fraction))
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[part] if part else ""
    return ("█" * full + partial).ljust(width, "·")[:width]


def count(n: int | float) -> str:
    """Step counts that stay short: 950, 17.2k, 20k, 1.5M."""
    n = int(n)
    if n < 10_000:
        return str(n)
    if n < 1_000_000:
        text = f"{n / 1000:.1f}".rstrip("0").rstrip(".")
        return f"{text}k"
    return f"{n / 1e6:.1f}".rstrip("0").rstrip(".") + "M"


def axis(x: float) -> str:
    """An axis label: integers as integers (steps), other values as `number`."""
    if float(x).is_integer() and abs(x) < 1e9:
        return count(x) if abs(x) >= 10_000 else str(int(x))
    return number(x)
