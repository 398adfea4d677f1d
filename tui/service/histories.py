"""The charts' points cross the wire every few seconds, not with every snapshot.

A run's loss and metric histories (a few thousand points each) are the bulk of
a snapshot, and the chart of a run that lasts hours needs no faster redraw. So the
engine sends them whole every `HISTORY_EVERY_S` (10 s; to a new client at once),
and in between a snapshot leaves them out; the client puts back the points of
the last whole one. A whole one carries at most `WIRE_POINTS` points per curve:
the chart draws one envelope per column, so each bucket's lowest and highest
points are kept (a spike survives, a NaN run's divergence too). This keeps what
three rooms cost the engine near what none costs (`bench/service_bench.py`).
"""

from __future__ import annotations

from dataclasses import replace


WIRE_POINTS = 512  # per curve: two per column of the widest chart, with room to spare


def envelope(points: tuple, limit: int = WIRE_POINTS) -> tuple:
    """At most `limit` points: each of limit/2 buckets gives its lowest and highest,
    in x order (one pass, no per-point call: it runs for every curve every 5 s)."""
    n = len(points)
    if n <= limit:
        return points
    buckets = (limit - 2) // 2  # the first and the last points are always kept: the
    # chart's step axis then ends at the run's last step, as the runs table says
    out = []
    append = out.append
    for b in range(buckets):
        start, end = b * n // buckets, (b + 1) * n // buckets
        if start >= end:
            continue
        lo = hi = points[start]
        lo_y = hi_y = lo[1]
        i_lo = i_hi = start
        for i in range(start + 1, end):
            y = points[i][1]
            if y < lo_y:
                lo_y, i_lo = y, i
            elif y > hi_y:
                hi_y, i_hi = y, i
        lo, hi = points[i_lo], points[i_hi]
        if i_lo == i_hi:
            append(lo)
        elif i_lo < i_hi:
            append(lo)
            append(hi)
        else:
            append(hi)
            append(lo)
    if out[0] is not points[0]:
        out.insert(0, points[0])
    if out[-1] is not points[-1]:
        out.append(points[-1])
    return tuple(out)


def enveloped(snap):
    """The snapshot with every curve cut to its envelope for the wire."""
    live = {rid: replace(view, loss_history=envelope(view.loss_history),
                         metric_history=envelope(view.metric_history))
            for rid, view in snap.engine.live.items()}
    return replace(snap, engine=replace(snap.engine, live=live))


def without_histories(snap):
    """The snapshot with every run's chart points left out (the client keeps its last)."""
    live = {rid: replace(view, loss_history=(), metric_history=())
            for rid, view in snap.engine.live.items()}
    return replace(snap, engine=replace(snap.engine, live=live))


def with_histories_of(snap, last):
    """A snapshot sent without chart points, given back the points of the last whole one."""
    if last is None:
        return snap
    old = last.engine.live
    live = {rid: replace(view, loss_history=old[rid].loss_history,
                         metric_history=old[rid].metric_history) if rid in old else view
            for rid, view in snap.engine.live.items()}
    return replace(snap, engine=replace(snap.engine, live=live))
