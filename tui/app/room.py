"""What one refresh of the control room shows, built off the UI thread.

The tick worker turns an EngineSnapshot into a frozen RoomSnapshot: the engine
snapshot itself, the projected end of the plan (the engine's re-estimation
when it exists, the plan calendar otherwise) and, once the campaign is over,
its conclusion (which reads metrics files, hence off the UI thread). The
header model lives here too: countdown, slack level and decision status are
pure functions of a RoomSnapshot, so they are tested without textual.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..campaign.calendar import Calendar
from ..campaign.plan import Plan
from ..engine.estimate import project
from . import format as fmt

TIGHT_FRACTION = 0.10  # slack under 10 % of the window is amber


@dataclass(frozen=True)
class Projection:
    planned_end_t: float | None
    projected_end_t: float | None
    source: str  # "estimate" | "calendar" | "none"


def project_end(plan: Plan, calendar: Calendar, state, now: float) -> Projection:
    """The engine's re-estimation after the pilot, else the plan calendar.

    `tui.engine.estimate.project` reads the pilots' metrics files (cached), so
    this runs in the tick worker, never on the UI thread.
    """
    try:
        p = project(plan, state, plan.state_dir / "runs", now)
        if p.projected_end_t is not None:
            return Projection(p.planned_end_t, p.projected_end_t, "estimate")
    except Exception:  # a projection must never take the room down
        pass
    if state.window_start is None:
        return Projection(None, None, "none")
    end = state.window_start + calendar.end_to_end_hours * 3600.0
    return Projection(end, end, "calendar")


@dataclass(frozen=True)
class RoomSnapshot:
    """Everything one refresh needs, frozen; handed from the worker to the UI."""

    now: float
    engine: object  # EngineSnapshot
    projection: Projection
    conclusion: str | None = None
    tick_error: str | None = None

    @property
    def state(self):
        return self.engine.state

    @property
    def phase(self) -> str:
        return self.engine.phase


def slack_level(slack_s: float | None, window_s: float | None) -> str:
    """'ok' (green), 'tight' (amber: under 10 % of the window) or 'over' (red)."""
    if slack_s is None:
        return "unknown"
    if slack_s < 0:
        return "over"
    if window_s and slack_s < TIGHT_FRACTION * window_s:
        return "tight"
    return "ok"


@dataclass(frozen=True)
class HeaderModel:
    title: str
    question: str
    time_left: str
    window_end_local: str
    window_end_utc: str
    projected_end: str
    slack: str
    level: str  # ok | tight | over | unknown
    phase: str
    decision: str
    decision_level: str  # pending | done | info
    paused: bool
    wrapup: str | None
    checkpoint_every: str | None = None  # the interval the engine asks for (Young/Daly if auto)


def header_model(plan: Plan, room: RoomSnapshot | None) -> HeaderModel:
    c = plan.campaign
    if room is None:
        return HeaderModel(c.name, c.question, "—", "—", "—", "—", "—", "unknown",
                           "starting", "—", "info", False, None)
    state, now = room.state, room.now
    end = state.window_end
    left = None if end is None else end - now
    window_s = None if end is None or state.window_start is None else end - state.window_start
    projected = room.projection.projected_end_t
    slack_s = None if end is None or projected is None else end - projected
    level = slack_level(slack_s, window_s)
    slack = fmt.hours(None if slack_s is None else slack_s / 3600)
    if level == "over":
        slack = f"OVER by {fmt.hours(-slack_s / 3600)[1:]}"
    elif level == "tight":
        slack = f"{slack} tight"
    elif level == "ok":
        slack = f"{slack} ok"
    if left is None:
        time_left = "window not started"
    elif left <= 0:
        time_left = f"window ENDED {fmt.duration(-left)} ago"
    else:
        time_left = f"{fmt.duration(left)} left"
    decision, dlevel = decision_text(plan, room)
    wrap = state.wrapup
    wrapup = None if not wrap else {"started": "wrap-up running", "done": "bundle verified",
                                    "failed": "bundle NOT verified"}.get(wrap.get("state"))
    every = getattr(room.engine, "checkpoint_interval_min", None)
    checkpoint_every = None if every is None else (
        f"ckpt every {fmt.duration(every * 60)}" + (" (auto)" if plan.checkpoint.auto else ""))
    return HeaderModel(c.name, c.question, time_left, fmt.local_clock(end), fmt.utc_clock(end),
                       fmt.local_clock(projected), slack, level, room.phase, decision, dlevel,
                       state.paused, wrapup, checkpoint_every)


def decision_text(plan: Plan, room: RoomSnapshot) -> tuple[str, str]:
    state = room.state
    if room.conclusion:
        return f"conclusion: {room.conclusion}", "done"
    if state.decision_pending is not None:
        return "decision PENDING (x)", "pending"
    decided = state.decided
    if decided:
        what = decided["decision"]
        if what == "drop":
            what = "drop " + ",".join(decided.get("drop") or [])
        return f"decided: {what}", "done"
    if plan.pilot is None:
        return "no pilot decision", "info"
    return "decision after the pilot", "info"


def signature(room_engine) -> tuple:
    """What changes when there is something new to draw (besides the clock)."""
    state = room_engine.state
    live = tuple(sorted((rid, v.records, v.bad_lines) for rid, v in room_engine.live.items()))
    return (state.events, room_engine.phase, live)
