"""Short, calm text for the figures the control room shows: durations, numbers, sizes.

Every panel formats time and numbers the same way, so the helpers live here
(pure stdlib, no textual) and are unit-tested directly. Two rules a person
relies on: a duration is written in words a person reads at a glance
(`11 min`, `2 d 3 h`, never `0.333333 h`), and a number keeps at most four
significant digits and is shortened to fit its column instead of being cut
(`0.004273` becomes `4.27e-3` where six cells are all there is).
"""

from __future__ import annotations

import math

from ..campaign.units import human_duration
import time


def duration(seconds: float | None) -> str:
    """'2 d 3 h', '5 h 07 min', '11 min', '45 s': the core's one formatter."""
    return human_duration(seconds)


def signed_duration(seconds: float | None) -> str:
    """A duration with its sign, for the slack: '+1 d 7 h', '-45 min', '+0 s'."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    return ("-" if seconds < 0 else "+") + duration(abs(seconds))


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


def _compact(text: str) -> str:
    """'5.931e+35' -> '5.931e35', '4.27e-03' -> '4.27e-3': the exponent without padding."""
    mantissa, e, exponent = text.partition("e")
    if not e:
        return text
    sign = "-" if exponent.startswith("-") else ""
    return f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"


def number(x, width: int | None = None) -> str:
    """A metric value in at most 4 significant digits; nan/inf spelled out; None as '—'.

    With `width`, the fewest digits are dropped (4, then 3, 2, 1; plain or
    exponent form, whichever fits) until the text fits: a value is shortened,
    never cut. Only a value that cannot fit even with one digit comes back longer.
    """
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    if isinstance(x, bool) or isinstance(x, int) and abs(x) < 10**15:
        return str(x)
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    text = _compact(f"{x:.4g}")
    if width is None or len(text) <= width:
        return text
    for digits in (4, 3, 2, 1):
        for form in ("g", "e"):
            candidate = _compact(f"{x:.{digits}{form}}" if form == "g"
                                 else f"{x:.{digits - 1}e}")
            if len(candidate) <= width:
                return candidate
    return _compact(f"{x:.0e}")


def number_width(values, floor: int = 1, ceiling: int = 7) -> int:
    """The column width that shows every value whole in 4 digits, within [floor, ceiling]."""
    widest = max((len(number(v)) for v in values), default=floor)
    return max(floor, min(ceiling, widest))


def pct(x: float | None) -> str:
    return "N/A" if x is None else f"{x:.0f}%"


def clip(text: str, width: int) -> str:
    """Cut to width with an ellipsis when something was cut (free text only, never a value)."""
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


def axis(x: float, width: int | None = None) -> str:
    """An axis label: integers as integers (steps), other values as `number`."""
    if float(x).is_integer() and abs(x) < 1e9:
        return count(x) if abs(x) >= 10_000 else str(int(x))
    return number(x, width)


def usd(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:,.2f} USD"
