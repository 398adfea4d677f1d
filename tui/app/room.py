"""The header as data: countdown, slack level, decision status and, at the end, the verdict.

Pure functions of a `SessionSnapshot` (built off the UI thread by the
session), so they are tested without textual. Once the campaign is `done`
(the bundle verified) the header says what a person came for: the verdict,
the cost per accepted deliverable, and that the box can be released.
"""

from __future__ import annotations

import time

from dataclasses import dataclass

from ..campaign.plan import Plan
from ..campaign.text import for_terminal
from ..session import SessionSnapshot
from . import format as fmt

TIGHT_FRACTION = 0.10  # slack under 10 % of the window is amber
VERDICT_WORD = {"yes": "ANSWERED YES", "no": "ANSWERED NO", "inconclusive": "INCONCLUSIVE"}


def slack_level(slack_s: float | None, window_s: float | None) -> str:
    """'ok' (green), 'tight' (amber: under 10 % of the window) or 'over' (red)."""
    if slack_s is None:
        return "unknown"
    if slack_s < 0:
        return "over"
    if window_s and slack_s < TIGHT_FRACTION * window_s:
        return "tight"
    return "ok"


def release_text(window_left_s: float | None) -> str:
    """What the rental window means once the bundle is safe."""
    if window_left_s is None:
        return "the box can be released"
    if window_left_s <= 0:
        return f"the window ended {fmt.duration(-window_left_s)} ago: release the box"
    return f"window ends in {fmt.duration(window_left_s)}: the box can be released"


def budget_short(ending) -> str:
    """'12.34 USD per accepted model' or 'cost per model undefined: 85.00 USD incurred'."""
    if ending.per_deliverable_usd is not None:
        return f"{fmt.usd(ending.per_deliverable_usd)} per accepted {ending.unit}"
    return f"cost per {ending.unit} undefined: {fmt.usd(ending.incurred_usd)} incurred"


@dataclass(frozen=True)
class HeaderModel:
    """The header's words and levels, built from a snapshot without textual."""
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
    verdict: str | None = None  # 'ANSWERED NO', once the runs are over
    verdict_kind: str | None = None  # yes | no | inconclusive
    budget: str | None = None  # in `done`: the cost per accepted deliverable (or undefined)
    release: str | None = None  # in `done`: the rental window left
    store: str | None = None  # [store]: "off-box: 14/15 objects, 3 min behind"
    store_level: str = "dim"  # dim | pending (the store does not answer)

    @property
    def done(self) -> bool:
        """The bundle is verified and the ending is known: a snapshot that has no ending
        yet (the first one after a reconnect, replayed from the ledger alone) keeps the
        countdown until the next one brings the verdict, never "· None"."""
        return self.phase == "done" and self.release is not None


def header_model(plan: Plan, room: SessionSnapshot | None) -> HeaderModel:
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
    slack = fmt.signed_duration(slack_s)
    if level == "over":
        slack = f"OVER by {fmt.duration(-slack_s)}"
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
                                    "failed": "bundle NOT verified"}.get(wrap.state)
    every = room.engine.checkpoint_interval_min
    checkpoint_every = None if every is None else (
        f"ckpt every {fmt.duration(every * 60)}" + (" (auto)" if plan.checkpoint.auto else ""))
    ending = room.ending
    verdict = kind = budget = release = None
    if ending is not None:
        kind = ending.verdict.kind
        verdict = VERDICT_WORD.get(kind, kind)
        if room.phase == "done":
            budget = budget_short(ending)
            release = release_text(ending.window_left_s)
    stored = getattr(room, "store", None)
    store = for_terminal(stored.text(now)) if stored is not None else None
    store_level = "pending" if stored is not None and (
        stored.down_since is not None or (stored.bundle is not None
                                          and not stored.bundle.verified)) else "dim"
    return HeaderModel(c.name, c.question, time_left, fmt.local_clock(end), fmt.utc_clock(end),
                       fmt.local_clock(projected), slack, level, room.phase, decision, dlevel,
                       state.paused, wrapup, checkpoint_every, verdict, kind, budget, release,
                       store, store_level)


def link_text(link) -> str | None:
    """What the room says of its link to the engine process, when it is not up."""
    if link is None or not link.lost:
        return None
    since = time.strftime("%H:%M", time.localtime(link.since_t))
    where = "" if link.where == "this box" else f" on {link.where}"
    why = f" ({link.detail})" if link.detail else ""
    return (f"LINK LOST to the engine{where} since {since}{why}: last known state shown; "
            "retrying, r starts it")


def decision_text(plan: Plan, room: SessionSnapshot) -> tuple[str, str]:
    state = room.state
    lost = link_text(room.link)
    if lost is not None:
        return lost, "pending"
    if room.ending is not None:
        return room.ending.verdict.reason, "done"
    if room.conclusion is not None:
        return f"conclusion: {room.conclusion.headline}", "done"
    if state.decision_pending is not None:
        return "decision PENDING (x)", "pending"
    decided = state.decided
    if decided:
        return f"decided: {decided.text}", "done"
    if plan.pilot is None:
        return "no pilot decision", "info"
    return "decision after the pilot", "info"


def signature(room: SessionSnapshot) -> tuple:
    """What changes when there is something new to draw (besides the clock)."""
    engine = room.engine
    live = tuple(sorted((rid, v.records, v.bad_lines) for rid, v in engine.live.items()))
    stored = getattr(room, "store", None)
    store = None if stored is None else (stored.stored, stored.total, stored.down_since,
                                         stored.bundle)
    return (engine.state.events, engine.phase, live, id(room.probe), room.wrapup, store)


def conclusion_line(room: SessionSnapshot) -> str | None:
    """The events log's one line for the outcome: the verdict, or before it the conclusion."""
    if room.ending is not None:
        return f"verdict: {room.ending.verdict.text}"
    return f"conclusion: {room.conclusion.text}" if room.conclusion is not None else None
