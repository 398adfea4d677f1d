"""Loss vs step per run as a hand-written SVG (no matplotlib on the box, no torch).

The curves are read through the engine's own feeds (SDK JSONL first, then
stdout through the plan's `[metrics]` regexes), so the picture shows what
the stop rules saw. Non-finite values are not drawn; the step where a run
was stopped is marked. A log scale is used when the losses span two decades.
"""

from __future__ import annotations

import math
from pathlib import Path
from xml.sax.saxutils import escape

from ..campaign.plan import Plan
from ..engine.feed import recorded_sources
from ..engine.state import RunState

WIDTH, HEIGHT = 760, 420
LEFT, RIGHT, TOP, BOTTOM = 64, 230, 36, 48
MAX_POINTS = 1500
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")


def _number(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def loss_points(plan: Plan, run_dir: Path) -> list[tuple[float, float]]:
    """(step, loss) for every finite loss, from the JSONL file or else stdout."""
    for records in recorded_sources(run_dir, plan.metrics):
        points = []
        for r in records:
            step, loss = _number(r.get("global_step", r.get("step"))), _number(r.get("loss"))
            if step is not None and loss is not None and math.isfinite(loss):
                points.append((step, loss))
        if points:
            return points
    return []


def _thin(points):
    if len(points) <= MAX_POINTS:
        return points
    stride = math.ceil(len(points) / MAX_POINTS)
    return points[::stride] + [points[-1]]


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def _label(v: float) -> str:
    return f"{v:.3g}"


def render(plan: Plan, runs: list[RunState], runs_dir: Path) -> str:
    series = [(run, _thin(loss_points(plan, runs_dir / run.id))) for run in runs]
    drawn = [(run, pts) for run, pts in series if pts]
    xs = [x for _, pts in drawn for x, _ in pts]
    ys = [y for _, pts in drawn for _, y in pts]
    log = bool(ys) and min(ys) > 0 and max(ys) / min(ys) >= 100
    fy = (lambda y: math.log10(y)) if log else (lambda y: y)
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    y0, y1 = (min(map(fy, ys)), max(map(fy, ys))) if ys else (0.0, 1.0)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y0, y1 = y0 - 0.5, y1 + 0.5
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x):
        return LEFT + (x - x0) / (x1 - x0) * pw

    def py(y):
        return TOP + ph - (fy(y) - y0) / (y1 - y0) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">',
           f'<title>{escape(plan.campaign.name)}: loss vs step</title>',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{LEFT}" y="20" font-size="13">{escape(plan.campaign.name)}: loss vs '
           f'step{" (log scale)" if log else ""}</text>',
           f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>']
    for t in _ticks(x0, x1):
        x = px(t)
        out.append(f'<line x1="{x:.1f}" y1="{TOP + ph}" x2="{x:.1f}" y2="{TOP + ph + 4}" '
                   f'stroke="#999"/><text x="{x:.1f}" y="{TOP + ph + 16}" '
                   f'text-anchor="middle">{_label(t)}</text>')
    for t in _ticks(y0, y1):
        y = TOP + ph - (t - y0) / (y1 - y0) * ph
        out.append(f'<line x1="{LEFT - 4}" y1="{y:.1f}" x2="{LEFT + pw}" y2="{y:.1f}" '
                   f'stroke="#eee"/><text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                   f'{_label(10 ** t if log else t)}</text>')
    out.append(f'<text x="{LEFT + pw / 2:.1f}" y="{HEIGHT - 10}" text-anchor="middle">step'
               f'</text><text x="14" y="{TOP + ph / 2:.1f}" text-anchor="middle" '
               f'transform="rotate(-90 14 {TOP + ph / 2:.1f})">loss</text>')
    for i, (run, pts) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        ly = TOP + 14 + 16 * i
        note = "" if pts else " (no loss recorded)"
        if run.stop is not None and run.stop.rule not in ("pilot", "pilot_bound", "wrapup"):
            note += f" stopped: {run.stop.rule}"
        out.append(f'<line x1="{LEFT + pw + 12}" y1="{ly - 4}" x2="{LEFT + pw + 30}" '
                   f'y2="{ly - 4}" stroke="{colour}" stroke-width="2"/><text '
                   f'x="{LEFT + pw + 34}" y="{ly}">{escape(run.id + note)}</text>')
        if not pts:
            continue
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                   f'points="{path}"><title>{escape(run.id)}</title></polyline>')
        if run.stop is not None and run.stop.rule not in ("pilot", "pilot_bound", "wrapup"):
            x, y = px(pts[-1][0]), py(pts[-1][1])
            out.append(f'<path d="M{x - 4:.1f},{y - 4:.1f} l8,8 m0,-8 l-8,8" '
                       f'stroke="{colour}" stroke-width="2"/>')
    if not drawn:
        out.append(f'<text x="{LEFT + pw / 2:.1f}" y="{TOP + ph / 2:.1f}" '
                   f'text-anchor="middle">no run reported a finite loss</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
