"""The timeline as data: planned bars beside actual bars, per GPU lane.

Planned bars come from the plan calendar (hours from the window start); actual
bars from the runs the ledger knows (launch to exit, or to now while alive).
Intervals without a GPU lane go on one 'off-GPU' row where human time and
host work (wrap-up, retrieval) are told apart by their `who`. The widget only
maps hours to cells; everything here is plain data, tested without textual.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..campaign.calendar import Calendar
from .rows import run_label


@dataclass(frozen=True)
class Bar:
    """One interval on the timeline: planned or actual, machine or human."""
    start_h: float
    end_h: float
    label: str
    who: str  # human | machine
    state: str  # planned | running | completed | stopped | failed | dropped


@dataclass(frozen=True)
class LaneRow:
    """One timeline row: a GPU lane's plan, its actual runs, or the off-GPU tasks."""
    name: str  # shown at the left
    kind: str  # plan | real | off
    bars: tuple[Bar, ...]


@dataclass(frozen=True)
class TimelineModel:
    """The whole timeline: its rows, the window, now and the projected end."""
    span_h: float
    window_h: float
    now_h: float | None
    projected_h: float | None
    rows: tuple[LaneRow, ...]


ACTUAL_ROW = "actual"
OFF_ROW = "off"
LEGEND = (("▒", "plan", "planned"), ("█", "ran", "running"), ("░", "human", "human"),
          ("┊", "now", "now"), ("┃", "end", "window"))  # (glyph, word, style suffix)


QUANTUM_S = 60.0  # at most: on a long window a cell spans many minutes
MAX_CELLS = 240  # the widest timeline drawn: its cell is the finest time it must show


def quantum_s(window_h: float) -> float:
    """How far time moves the model at once: a minute on a window of days, less on a
    short one, where a minute is several cells (a 20-minute demo window is 20 s a cell
    at 60 columns) and "now" drawn a minute late trailed the bars that ran."""
    return max(1.0, min(QUANTUM_S, window_h * 3600.0 / MAX_CELLS))


def timeline_model(calendar: Calendar, state, now: float,
                   projected_end_t: float | None = None) -> TimelineModel:
    start = state.window_start
    window_h = calendar.window_hours
    if state.window_start is not None and state.window_end is not None:
        window_h = (state.window_end - state.window_start) / 3600.0
    quantum = quantum_s(window_h)
    now = now - now % quantum
    if start is not None:
        now = max(now, start)  # the window's first seconds: now is its start, not before
    if projected_end_t is not None:
        projected_end_t = projected_end_t - projected_end_t % quantum
    now_h = None if start is None else (now - start) / 3600.0
    projected_h = None if (start is None or projected_end_t is None) \
        else (projected_end_t - start) / 3600.0
    lanes = calendar.lanes
    planned: dict[str, list[Bar]] = {lane: [] for lane in lanes}
    off: list[Bar] = []
    for e in calendar.entries:
        if e.end - e.start <= 0:
            continue
        bar = Bar(e.start, e.end, e.task.label, e.task.who, "planned")
        if e.lanes:
            for lane in e.lanes:
                planned.setdefault(lane, []).append(bar)
        else:
            off.append(bar)
    actual: dict[str, list[Bar]] = {lane: [] for lane in planned}
    if start is not None:
        for run in state.runs:
            if run.launched_t is None:
                continue
            end_t = run.ended_t if run.ended_t is not None else now
            label = run_label(run.kind, run.target, run.attempt)
            bar = Bar((run.launched_t - start) / 3600.0, (end_t - start) / 3600.0, label,
                      "machine", run.state)
            for lane in run.lanes or ():
                actual.setdefault(lane, []).append(bar)
    rows: list[LaneRow] = []
    all_lanes = tuple(planned)
    for lane in all_lanes:  # lanes are named `lot:index` here as in `check` and the events
        rows.append(LaneRow(lane, "plan", tuple(planned[lane])))
        rows.append(LaneRow(ACTUAL_ROW, "real", tuple(actual.get(lane, ()))))
    rows.append(LaneRow(OFF_ROW, "off", tuple(off)))
    ends = [window_h, calendar.end_to_end_hours]
    if now_h is not None:
        ends.append(now_h)
    if projected_h is not None:
        ends.append(projected_h)
    span = max(ends + [1e-6])
    return TimelineModel(span, window_h, now_h, projected_h, tuple(rows))


TICK_STEPS_H = (1 / 60, 5 / 60, 0.25, 0.5, 1, 2, 3, 6, 12, 24, 48, 96, 168)


def tick_step(span_h: float, width: int) -> float:
    """A round tick spacing that leaves about 10 cells per label."""
    most = max(1, width // 10)
    for step in TICK_STEPS_H:
        if span_h / step <= most:
            return step
    return TICK_STEPS_H[-1]


def tick_label(h: float) -> str:
    """'0', '30 min', '12 h', '2 d': the same units as every duration the room shows."""
    if h == 0:
        return "0"
    if h < 1:
        return f"{h * 60:.0f} min"
    if h >= 48 and abs(h / 24 - round(h / 24)) < 1e-9:
        return f"{h / 24:.0f} d"
    return f"{h:g} h"
