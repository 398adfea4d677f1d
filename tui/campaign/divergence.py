"""Which values of a set of curves are a divergence: one rule for the bundle's figures and
the control room's live chart.

A value is clipped when it is not finite, or when it is over CLIP_FACTOR times
the median of the other runs' finite values (hot_lr at 5.9e35 beside losses
near 1): a clipped value never sets a y range, so the curves that did not
diverge stay readable, and where a run's clipped stretch starts is kept, so
it can be marked. Pure, stdlib only: it lives with the plan's other value
rules (numbers.py) at the bottom of the layers, so the room imports it
without the bundle builder.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

CLIP_FACTOR = 1e6
MAX_MARKS = 3


@dataclass(frozen=True)
class Clipped:
    """A run's points with each clipped value as None, and where clipped stretches start."""
    points: tuple[tuple[float, float | None], ...]
    starts: tuple[tuple[float, str], ...]  # (x, the value as text), the first MAX_MARKS


def value_text(v: float) -> str:
    return str(v) if not math.isfinite(v) else f"{v:.2g}"


def clip_diverged(raw: dict) -> dict:
    """run -> Clipped, for `raw`: run -> [(x, y), ...]."""
    finite = {rid: sorted(v for _, v in pts if math.isfinite(v)) for rid, pts in raw.items()}
    out = {}
    for rid, points in raw.items():
        others = [v for o, vs in finite.items() if o != rid for v in vs]
        ref = statistics.median(others) if others else None
        cap = CLIP_FACTOR * abs(ref) if ref else None
        kept, starts, inside = [], [], False
        for x, v in points:
            bad = not math.isfinite(v) or (cap is not None and abs(v) > cap)
            kept.append((x, None if bad else v))
            if bad and not inside:
                starts.append((x, value_text(v)))
            inside = bad
        out[rid] = Clipped(tuple(kept), tuple(starts[:MAX_MARKS]))
    return out
