"""The charts' points cross the wire every few seconds, not with every snapshot.

A run's loss and metric histories (a few thousand points each) are the bulk of
a snapshot, and the room redraws its chart at most every five seconds. So the
engine sends them whole every `HISTORY_EVERY_S` (and to a new client at once),
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
    """At most `limit` points: each of limit/2 buckets gives its lowest and highest."""
    n = len(points)
    if n <= limit:
        return points
    buckets = limit // 2
    out = []
    for b in range(buckets):
        chunk = points[b * n // buckets:(b + 1) * n // buckets]
        if not chunk:
            continue
        lo = min(chunk, key=lambda p: p[1])
        hi = max(chunk, key=lambda p: p[1])
        out.extend((lo, hi) if lo[0] <= hi[0] else (hi, lo))
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
