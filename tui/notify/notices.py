"""What a person is told, composed from ledger events (and the state where needed).

A notice is short (a phone's lock screen), says what happened and what the
person can do about it, and names the campaign. Text a run controls (a stop
reason, a warning) is reduced to printable characters and bounded. Each
notice carries the key its rate limit counts by: its kind and, where there is
one, its run (a run printing NaN a thousand times is one stop notice).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable

from ..campaign.loading.sections import rule_label
from ..campaign.notify_plan import NoticeKind
from ..campaign.plan import Plan
from ..campaign.retrieval import retrieval_command, store_fetch_command
from ..campaign.units import human_duration
from ..engine.conclusion.crash import failure_cause
from ..engine.decision.answer import Decision
from ..engine.decision.deadline import decision_wait_text, default_decision
from ..engine.engine import ENDED
from ..engine.ledger import events
from ..engine.lost_work import cut_runs
from ..engine.watching.watchdog import size_text

TEXT_MAX = 400
NOT_DELIVERED = "notice not delivered: "  # the warnings the sender writes (never re-sent)
_GPU_WARNING = re.compile(r"GPU (\d+) (is lost|idle for)")


@dataclass(frozen=True)
class Notice:
    kind: NoticeKind
    title: str
    body: str
    key: str  # what the rate limit counts by: kind, and run where there is one
    t: float  # the ledger time of what it tells

    @property
    def name(self) -> str:
        """How a lost notice is named in the ledger: its kind and title."""
        return f'{self.kind.value} "{self.title}"'


def plain(text, limit: int = TEXT_MAX) -> str:
    """Printable characters only, bounded: text a run controls, made safe to send."""
    text = "".join(ch if ch.isprintable() or ch == "\n" else " " for ch in str(text))
    return text if len(text) <= limit else text[:limit - 1] + "…"


def utc_clock(t: float) -> str:
    return time.strftime("%H:%M UTC", time.gmtime(t))


def pilot_line(plan: Plan, pilot: dict) -> str:
    """The pilot figures in one line: `control done (val_acc 0.61, step 40); ...`."""
    metric = plan.campaign.metric
    parts = []
    for vid, f in pilot.items():
        if not isinstance(f, dict):
            continue
        stop = f.get("stop") or {}
        if stop.get("rule") and stop.get("rule") not in ("pilot", "pilot_bound"):
            parts.append(f"{vid} STOPPED ({stop.get('rule')}"
                         + (f" at step {stop['step']:g}" if isinstance(stop.get("step"), (int, float)) else "")
                         + ")")
            continue
        figures = []
        if isinstance(f.get("metric"), (int, float)):
            figures.append(f"{metric} {f['metric']:.4g}")
        elif isinstance(f.get("last_loss"), (int, float)):
            figures.append(f"loss {f['last_loss']:.4g}")
        if isinstance(f.get("step"), (int, float)):
            figures.append(f"step {f['step']:g}")
        state = f.get("state") or "?"
        parts.append(f"{vid} {state}" + (f" ({', '.join(figures)})" if figures else ""))
    return "; ".join(parts) or "no pilot figures"


class Composer:
    """Ledger events -> notices. `snapshot`: the engine's (state and phase, taken off the
    engine's loop); `ending`: `tui.session.ending.ending_of`, injected by the session (the
    verdict and the budget have one home, above this layer); `history`: the events the
    ledger held at open (to tell a crash from a clean stop)."""

    def __init__(self, plan: Plan, snapshot: Callable[[], object],
                 ending: Callable | None = None, history: Callable[[], list] | None = None,
                 clock: Callable[[], float] = time.time):
        self.plan = plan
        self.snapshot = snapshot
        self.ending = ending
        self.history = history or (lambda: [])
        self.clock = clock
        self.campaign = plain(plan.campaign.name, 80)

    def _notice(self, kind: NoticeKind, title: str, body: str, t: float,
                run: str | None = None) -> Notice:
        return Notice(kind, plain(f"{self.campaign}: {title}", 160), plain(body),
                      f"{kind.value}:{run or ''}", t)

    def compose(self, ev: events.Event) -> Notice | None:
        handler = _COMPOSERS.get(type(ev))
        return handler(self, ev, float(ev.t or self.clock())) if handler else None

    # -- one method per event that may tell a person something ------------------
    def _on_stop_rule_fired(self, ev: events.StopRuleFired, t):
        return self._notice(NoticeKind.STOP, f"stop rule {rule_label(ev.rule)} stopped {ev.run}",
                            f"{ev.reason}. The run keeps its id and reason; it "
                            "is not an accepted deliverable; the queue goes on.", t, ev.run)

    def _on_run_exited(self, ev: events.RunExited, t):
        try:
            run = self.snapshot().state.run(ev.run)
        except KeyError:
            return None
        if run.state != "failed":
            return None
        cause = failure_cause(self.plan.state_dir / "runs" / ev.run)  # its exception line
        if run.retried:  # a hiccup `[retry]` relaunches: say so, not "the queue goes on"
            then = (f"A hiccup: {run.retried} follows, from its last verified checkpoint "
                    "(from the start without one), as a new attempt.")
        else:
            then = (f"Not retried: {run.not_retried}. " if run.not_retried else "") \
                + "The queue goes on with the next run."
        return self._notice(NoticeKind.FAILED, f"run {ev.run} failed",
                            f"{run.why_ended}" + (f": {cause}" if cause else "")
                            + f"; see .itera/runs/{ev.run}/stderr.log on the box. {then}",
                            t, ev.run)

    def _on_run_launch_failed(self, ev: events.RunLaunchFailed, t):
        return self._notice(NoticeKind.FAILED, f"run {ev.run} could not start",
                            f"{ev.error}", t, ev.run)

    def _on_checkpoint_verified(self, ev: events.CheckpointVerified, t):
        if ev.ok:
            return None
        return self._notice(NoticeKind.CHECKPOINT,
                            f"a checkpoint of {ev.run} failed verification",
                            f"{ev.path}: {ev.problem}. A resume would fall back "
                            "to the last verified checkpoint.", t, ev.run)

    def _on_decision_pending(self, ev: events.DecisionAsked, t):
        if ev.auto:
            return None  # decided already (config, --decide): nobody is waited for
        figures = pilot_line(self.plan, ev.pilot or {})
        if ev.deadline is not None:
            default = default_decision(self.plan, self.snapshot().state,
                                       ev.default or "continue").words
            then = (f"With no answer by {utc_clock(ev.deadline)} (in "
                    f"{human_duration(ev.deadline - t)}) the engine takes: {default}.")
        else:
            then = "The queue waits for you: nothing new starts until you decide."
        return self._notice(NoticeKind.DECISION, "the pilot is done: decide",
                            f"Pilot: {figures}. {then} Answer in the control room "
                            "(`itera-tui`) or with `itera-tui decide continue|drop:ID|wrapup` "
                            "(both work whether the engine waits or a headless run stopped "
                            "there).", t)

    def _on_decision_taken(self, ev: events.DecisionTaken, t):
        if ev.by != events.DecidedBy.DEADLINE:
            return None
        words = Decision(ev.decision, ev.drop or ()).words
        return self._notice(NoticeKind.DEADLINE, f"decision by the deadline: {words}",
                            f"Nobody answered ({ev.note or 'the deadline passed'}): the "
                            f"engine took the default, {words}; the ledger says by = "
                            "\"deadline\".", t)

    def _on_warning(self, ev: events.WarningEvent, t):
        message = ev.message
        if message.startswith(NOT_DELIVERED):
            return None
        gpu = _GPU_WARNING.match(message)
        if gpu:
            return self._notice(NoticeKind.GPU, message, "Look at the box (nvidia-smi): a run "
                                "holding a lost or idle GPU is paid for and makes no progress.",
                                t, f"gpu{gpu.group(1)}:{gpu.group(2)}")
        if message.startswith(("wrap-up failed", "wrap-up unavailable")):
            return self._notice(NoticeKind.WRAPUP_FAILED, "the wrap-up failed",
                                f"{message}. Keep the box; `itera-tui wrapup` tries again.", t)
        return None

    def _on_engine_started(self, ev: events.EngineStarted, t):
        before = [type(e) for e in self.history()
                  if isinstance(e, (events.EngineStarted, events.EngineStopped))]
        if not before or before[-1] is not events.EngineStarted:
            return None  # the first start, or the last one closed cleanly
        alive = len(self.snapshot().state.running)
        return self._notice(NoticeKind.RESTART, "the engine restarted after a crash",
                            "The last engine stopped without closing (a crash, kill -9, a "
                            f"reboot); this one reattached to {alive} live run(s) and goes "
                            "on from the ledger.", t)

    def _on_store_down(self, ev: events.StoreDown, t):
        return self._notice(NoticeKind.STORE, "the off-box store does not answer",
                            f"{ev.url}: {ev.message}. The runs go on; the "
                            "mirror retries and catches up when it answers. Until then the "
                            "results since it went away are on the box only.", t)

    def _on_store_at_risk(self, ev: events.StoreAtRisk, t):
        return self._notice(NoticeKind.STORE, "the bundle's delivery is at risk",
                            f"{ev.message}", t)

    def _on_store_delivered(self, ev: events.StoreDelivered, t):
        """With [store] the wrap-up notice waits for the delivery: it says where."""
        if not ev.verified:
            failed = "; ".join((ev.problems or ())[:3])
            return self._notice(NoticeKind.WRAPUP_FAILED, "the bundle did NOT verify at the "
                                "store", f"{ev.url}: {failed}. The bundle on the box "
                                "is verified: keep the box and fetch it with "
                                f"{retrieval_command(self.plan, self._bundle_rel())}", t)
        return self._wrapup_notice(self._bundle_rel(), True, None, ev.bytes, t,
                                   store_url=ev.url)

    def _bundle_rel(self) -> str:
        wrap = self.snapshot().state.wrapup
        return (wrap.bundle if wrap is not None and wrap.bundle else None) or "outputs/bundle"

    def _on_wrapup_done(self, ev: events.WrapupDone, t):
        if ev.verified and self.plan.store is not None:
            return None  # the notice waits for the delivery to the store (store_delivered)
        return self._wrapup_notice(ev.bundle or "outputs/bundle", ev.verified is True,
                                   ev.failures, ev.bytes, t)

    def _wrapup_notice(self, bundle: str, verified: bool, failures: int | None,
                       size: int | None, t, store_url: str | None = None):
        if not verified:
            return self._notice(NoticeKind.WRAPUP_FAILED, "the bundle did NOT verify",
                                f"{failures} failure(s) in {bundle}: see its "
                                "report.md; keep the box and run `itera-tui verify "
                                f"{bundle}`.", t)
        snap = self.snapshot()
        lines = []
        if self.ending is not None:
            try:
                ending = self.ending(self.plan, snap.state, self.clock())
                lines += [f"verdict: {ending.verdict.text}", f"budget: {ending.budget_text}"]
            except Exception as exc:  # the notice still goes, with what is known
                lines.append(f"verdict: not computed ({type(exc).__name__})")
        lines.append(f"bundle: {bundle} ({size_text(size) if size else 'size unknown'}, "
                     "verified)")
        if store_url:
            lines.append(f"stored off the box at {store_url}, verified there")
        wait = decision_wait_text(self.plan, snap.state)
        if wait:
            lines.append(wait)
        lines.append(f"fetch it: {store_fetch_command(self.plan, store_url)}" if store_url
                     else f"fetch it: {retrieval_command(self.plan, bundle)}")
        # last: a notice is bounded (TEXT_MAX), and the fetch command must survive whole
        lines += [f"cut by a box's end: {cut.line()}" for cut in cut_runs(snap.state)]
        return self._notice(NoticeKind.WRAPUP, "the bundle is verified", "\n".join(lines), t)

    # -- from the state, not an event --------------------------------------------
    def window_ending(self, now: float, lead_s: float) -> Notice | None:
        """The rental window ends within the lead time and work is left (runs alive or
        queued): the one notice no event carries. `lead_s` is `[notify]
        window_lead_minutes`; `window_lead_s` scales it to this window and its slack,
        and the words follow the slack: "wrap up now" only when the work is projected
        past the window's end."""
        snap = self.snapshot()
        state = snap.state
        if state.window_end is None or not 0 < state.window_end - now <= lead_s:
            return None
        if snap.phase in ENDED and not state.running:
            return None
        window_s = (state.window_end - state.window_start
                    if state.window_start is not None else None)
        slack_s = self._slack_s(state, now)
        if not state.window_end - now <= window_lead_s(lead_s, window_s, slack_s):
            return None
        left = human_duration(state.window_end - now)
        alive = ", ".join(r.id for r in state.running[:3]) or "none running"
        if slack_s is not None and slack_s >= 0:
            then = (f"The work is projected to end {human_duration(slack_s)} before it: "
                    "the wrap-up starts by itself; extend the rental if a run runs late.")
        elif slack_s is not None:
            then = (f"The work is projected {human_duration(-slack_s)} past it: wrap up "
                    "now (`itera-tui wrapup`) to keep the bundle, or extend the rental.")
        else:
            then = "Wrap up now (`itera-tui wrapup`) to keep the bundle, or extend the rental."
        return self._notice(NoticeKind.WINDOW, f"the rental window ends in {left}",
                            f"Work is left (phase {snap.phase}; {alive}). {then}", now)

    def _slack_s(self, state, now: float) -> float | None:
        """The header's slack: the window's end less the projected end (None unknown)."""
        from ..engine.estimate import project

        try:
            return project(self.plan, state, None, now).slack_s
        except Exception:  # a projection must never cost a notice
            return None


LEAD_FRACTION = 0.25  # of the window: a 20-minute window is told 5 minutes before its end


_COMPOSERS = {events.StopRuleFired: Composer._on_stop_rule_fired,
              events.RunExited: Composer._on_run_exited,
              events.RunLaunchFailed: Composer._on_run_launch_failed,
              events.CheckpointVerified: Composer._on_checkpoint_verified,
              events.DecisionAsked: Composer._on_decision_pending,
              events.DecisionTaken: Composer._on_decision_taken,
              events.WarningEvent: Composer._on_warning,
              events.EngineStarted: Composer._on_engine_started,
              events.StoreDown: Composer._on_store_down,
              events.StoreAtRisk: Composer._on_store_at_risk,
              events.StoreDelivered: Composer._on_store_delivered,
              events.WrapupDone: Composer._on_wrapup_done}
COMPOSED = tuple(_COMPOSERS)


def window_lead_s(configured_s: float, window_s: float | None,
                  slack_s: float | None) -> float:
    """How long before the window's end "window ending" is sent: the configured lead,
    at most a quarter of the window (a 60-minute lead on a 20-minute window fired at
    launch), earlier by the projected overrun when the work runs past the end (there
    is that much less time to act), never more than the configured lead."""
    lead = configured_s if not window_s else min(configured_s, window_s * LEAD_FRACTION)
    if slack_s is not None and slack_s < 0:
        lead = min(configured_s, lead - slack_s)
    return lead
