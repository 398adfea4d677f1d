"""The campaign's answer in one word: pending, yes, no, or inconclusive, and why.

There is no verdict while runs go on: until the campaign is over it is
`pending`, in `status`, the room and the report alike. A "no" must be earned:
every challenger that was not dropped has an accepted full run, or was ended
by one of the announced stop rules (a diverged variant is an answer). A
challenger stopped by a person or by the wrap-up, one that failed, never ran,
or whose run was not accepted, leaves the question open: that is
"inconclusive", never a firm no. So does one that produced no record at all:
stopped at start-up (importing, loading, a rendezvous longer than its limit),
or by any rule before its first record, it trained on nothing. The warning a
person gets before stopping or dropping the last challenger lives here too, so
both faces say the same.
Shared by the control room, headless, `status` and the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...campaign.loading.sections import RULES, rule_label
from ..rules import STARTUP
from ..scheduler import phase_of

# every announced [[stop]] rule answers for the variant it stopped, but `gpu_idle`: GPUs
# held idle (a deadlocked loader, a hung collective) say the run was stuck, not how the
# variant trains, so such a challenger leaves the question open (inconclusive)
ANSWERING_STOPS = tuple(rule for rule in RULES if rule != "gpu_idle")
VERDICTS = ("pending", "yes", "no", "inconclusive")
OVER = ("blocked", "finished", "wrapup", "done")  # phases after which no run starts


@dataclass(frozen=True)
class Verdict:
    kind: str  # pending | yes | no | inconclusive
    reason: str

    @property
    def text(self) -> str:
        word = {"yes": "answered yes", "no": "answered no", "pending": "pending",
                "inconclusive": "inconclusive"}[self.kind]
        return f"{word}: {self.reason}"

    @property
    def exists(self) -> bool:
        return self.kind != "pending"

    def to_dict(self) -> dict:
        return {"verdict": self.kind, "reason": self.reason}


def runs_over(plan, state) -> bool:
    """Whether the campaign's runs are over: nothing runs and nothing more will start."""
    return not state.running and phase_of(plan, state) in OVER


def pending_reason(plan, state) -> str:
    phase = phase_of(plan, state)
    if state.running:
        return f"{len(state.running)} run{'s' if len(state.running) != 1 else ''} still going"
    if phase == "decision":
        return "waiting for the decision after the pilot"
    if phase == "checks" and state.started_t is None:
        return "the campaign has not started"
    return f"the campaign is in its {phase} phase"


def challengers(plan, state) -> list:
    return [v for v in plan.variants if v.id != plan.campaign.control
            and v.id not in state.dropped]


def verdict_of(plan, state, conclusion, runs_dir: Path | None = None,
               unverified: dict[str, str] | None = None) -> Verdict:
    """`conclusion`: tui.engine.conclusion.outcome.Conclusion of the same state; `unverified`: run id
    -> deliverable failure (default: what the last bundle found)."""
    if not runs_over(plan, state):
        return Verdict("pending", pending_reason(plan, state))
    if not conclusion.conclusive:
        return Verdict("inconclusive", conclusion.text.removeprefix("inconclusive: "))
    if conclusion.winners:
        return Verdict("yes", conclusion.text)
    if not [v for v in plan.variants if v.id != plan.campaign.control]:
        return Verdict("inconclusive", "the plan has no challenger: nothing was compared "
                                       "with the control")
    if not challengers(plan, state):
        return Verdict("inconclusive", "every challenger was dropped: nothing was compared "
                                       "with the control")
    open_ = []
    for v in challengers(plan, state):
        runs = state.runs_of(v.id, "run")
        last = runs[-1] if runs else None
        if last is None:
            decided = state.decided
            why = ("wrap-up decided at the decision point" if decided
                   and decided.decision == "wrapup" else "not reached before the wrap-up")
            open_.append(f"{v.id} never ran ({why})")
        elif last.state == "completed":
            if v.id in conclusion.values:
                continue
            from .outcome import acceptance, unverified_of

            runs_dir = Path(plan.state_dir) / "runs" if runs_dir is None else runs_dir
            judged = acceptance(plan, last, runs_dir / last.id,
                                unverified_of(state) if unverified is None else unverified)
            if judged.accepted or judged.diverged:
                continue  # trained into NaN: an answer for that variant, like non_finite
            open_.append(f"{v.id}'s run was not accepted ({judged.reason})")
        elif last.stop is not None and last.stop.rule == STARTUP:
            open_.append(f"{v.id} produced no record (stopped at start-up: "
                         f"{last.stop.reason}): it never trained, nothing to compare")
        elif last.state == "stopped" and last.stop is not None \
                and last.stop.rule in ANSWERING_STOPS:
            from .outcome import produced_records

            runs_dir = Path(plan.state_dir) / "runs" if runs_dir is None else runs_dir
            # a stop at a step saw a record; a timed one (stall, resume) may not have
            if last.stop.step is None and not produced_records(plan, runs_dir / last.id):
                open_.append(f"{v.id} produced no record before its "
                             f"{rule_label(last.stop.rule)} stop "
                             f"({last.stop.reason}): it never trained, nothing to compare")
            # else an announced stop rule is an answer for that variant
        else:
            open_.append(f"{v.id} {last.state} ({last.why_ended})")
    if open_:
        return Verdict("inconclusive", "; ".join(open_))
    return Verdict("no", conclusion.text)


def last_challenger_warning(plan, state, targets) -> str | None:
    """What stopping or dropping `targets` (variant ids) costs the question when they
    are the last challengers still in play; None when others remain. The control's own
    warning is tui.session.refusals.stop_loss."""
    targets = set(targets) - {plan.campaign.control}
    if not targets:
        return None
    left = []
    for v in challengers(plan, state):
        runs = state.runs_of(v.id, "run")
        last = runs[-1] if runs else None
        if last is None or last.state in ("running", "completed"):
            left.append(v.id)  # could still bring a figure to compare with the control
    if not left or not set(left) <= targets:
        return None
    names = ", ".join(left)
    return (f"{names} {'is the last challenger' if len(left) == 1 else 'are the last challengers'}"
            ": stopped or dropped, no figure is left to compare with the control and the "
            "verdict will be inconclusive (the question stays open; what ran keeps its cost).")


def wrapup_warning(plan, state) -> str | None:
    """What wrapping up now costs the question, when it leaves the verdict
    inconclusive (the room's `w` confirm and `itera-tui wrapup` say it, as `s` says
    what a stop costs); None when the runs that make the verdict are done or the
    wrap-up changes nothing (decided at the decision point)."""
    if state.decided is not None and state.decided.decision == "wrapup":
        return None

    def completed(vid: str) -> bool:
        return any(r.state == "completed" for r in state.runs_of(vid, "run"))

    def in_play(vid: str) -> bool:  # running, or still to start
        runs = state.runs_of(vid, "run")
        return (runs[-1].state == "running") if runs else vid not in state.dropped

    control = plan.campaign.control
    if control and not completed(control) and in_play(control):
        return (f"{control}'s full run has not completed: wrapped up now it is stopped (or "
                "never starts), there is no completed control and the verdict will be "
                "inconclusive (what ran keeps its cost).")
    rivals = challengers(plan, state)
    waiting = [v.id for v in rivals if not completed(v.id) and in_play(v.id)]
    if waiting and not any(completed(v.id) for v in rivals):
        return (f"no challenger has a completed full run ({', '.join(waiting)} still "
                "running or to come): wrapped up now, nothing is compared with the control "
                "and the verdict will be inconclusive (what ran keeps its cost).")
    return None
