"""Loss curves drawn with braille dots: 2x4 points per terminal cell.

Each series (a run's bounded loss history) is reduced to one min/max envelope
per pixel column, so a history of any length costs the same to draw and a
spike is never thinned away. Thresholds are drawn as a dotted row where no
curve passes. A grid of (char, owner) cells comes out; the widget colours it
(owner: series index, -1 for a threshold, None for empty). Pure and tested.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

_BITS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))  # [row][col]
THRESHOLD_CHAR = "┄"
CLIP_CHAR = "▲"  # at the top edge: a diverged run's clipped stretch starts here
LOG_RATIO = 50.0  # all-positive data spanning more than this ratio is drawn on a log scale


@dataclass(frozen=True)
class ChartGrid:
    """The chart's cells, computed without textual so the drawing is tested alone."""
    cells: tuple[tuple[tuple[str, int | None], ...], ...]  # rows of (char, owner)
    y_min: float
    y_max: float
    x_min: float
    x_max: float
    log: bool


def _finite(points):
    return [(float(x), float(y)) for x, y in points
            if isinstance(y, (int, float)) and math.isfinite(y)
            and isinstance(x, (int, float)) and math.isfinite(x)]


def render_chart(series: list, thresholds: list[float], width: int,
                 height: int, clip_marks=(), unscaled=()) -> ChartGrid | None:
    """Draw `series` (lists of (x, y)) into width x height cells; None if nothing to draw.
    `clip_marks`: (series index, x) drawn as ▲ on the top row (a clipped divergence).
    `unscaled`: indices of series whose values do not set the y range (a diverged run:
    its early, not yet clipped values would squash the others); drawn at the edge
    where they leave it."""
    if width <= 0 or height <= 0:
        return None
    series = [_finite(s) for s in series]
    ys = [y for i, s in enumerate(series) if i not in unscaled for _, y in s] or \
        [y for s in series for _, y in s]
    if not ys:
        return None
    xs = [x for s in series for x, _ in s] + [float(x) for _, x in clip_marks
                                              if isinstance(x, (int, float)) and math.isfinite(x)]
    x_min, x_max = min(xs), max(xs)
    y_lo, y_hi = min(ys), max(ys)
    marks = [t for t in thresholds if isinstance(t, (int, float)) and math.isfinite(t)]
    log = y_lo > 0 and y_hi / y_lo > LOG_RATIO and all(t > 0 for t in marks)
    f = math.log10 if log else (lambda v: v)
    lo, hi = f(min([y_lo] + marks)), f(max([y_hi] + marks))
    if hi - lo < 1e-12:
        pad = abs(hi) * 0.1 or 0.5
        lo, hi = lo - pad, hi + pad
    pw, ph = width * 2, height * 4
    span_x = (x_max - x_min) or 1.0

    def px(x):
        return min(pw - 1, int((x - x_min) / span_x * (pw - 1) + 0.5))

    def py(y):  # 0 at the top
        return min(ph - 1, max(0, int((hi - f(y)) / (hi - lo) * (ph - 1) + 0.5)))

    bits = [[0] * width for _ in range(height)]
    owner: list[list[int | None]] = [[None] * width for _ in range(height)]

    def dot(x, y, who):
        cy, ry = divmod(y, 4)
        cx, rx = divmod(x, 2)
        bits[cy][cx] |= _BITS[ry][rx]
        owner[cy][cx] = who

    for who, points in enumerate(series):
        columns: dict[int, list[int]] = {}
        for x, y in points:
            columns.setdefault(px(x), []).append(py(y))
        prev = None  # (column, row) of the last point drawn
        for col in sorted(columns):
            rows = columns[col]
            if prev is not None:  # join to the previous column with a straight line
                (c0, r0), r1 = prev, rows[0]
                for c in range(c0 + 1, col):
                    dot(c, round(r0 + (r1 - r0) * (c - c0) / (col - c0)), who)
                if col - c0 == 1:
                    rows = rows + [r0 + (1 if r1 > r0 else -1 if r1 < r0 else 0)]
            for r in range(min(rows), max(rows) + 1):
                dot(col, r, who)
            prev = (col, columns[col][-1])
    cells = []
    threshold_rows = {py(t) // 4 for t in marks}
    for cy in range(height):
        row = []
        for cx in range(width):
            if bits[cy][cx]:
                row.append((chr(0x2800 + bits[cy][cx]), owner[cy][cx]))
            elif cy in threshold_rows:
                row.append((THRESHOLD_CHAR, -1))
            else:
                row.append((" ", None))
        cells.append(tuple(row))
    if cells:
        top = list(cells[0])
        for who, x in clip_marks:
            if isinstance(x, (int, float)) and math.isfinite(x):
                top[px(float(x)) // 2] = (CLIP_CHAR, who)
        cells[0] = tuple(top)
    inv = (lambda v: 10 ** v) if log else (lambda v: v)
    return ChartGrid(tuple(cells), inv(lo), inv(hi), x_min, x_max, log)
