"""What to launch next: a pure function of the plan and the replayed state.

The order follows the calendar: preparation steps (data check, resume check),
then the pilot of every variant, then the decision point (the queue waits),
then full runs by category and priority on free GPU lanes, then post steps.
Keeping this free of processes and files makes it testable with a fake state.

On a campaign over several boxes each box's engine drives only its share
(`campaign.boxes.BoxShare`): the variants placed on its lots, and the plan's
machine steps only where `runs_steps`. Steps and dependencies of another box's
share count as done here: no box waits for another.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Callable

from ..campaign.boxes import BoxShare
from ..campaign.plan import CATEGORY_RANK, Plan
from .ledger.records import Verification
from .ledger.state import TERMINAL, CampaignState, RunState, RunStatus
from .retry import retries_made


class Phase(StrEnum):
    """Where the campaign is, in calendar order: a str, so `status --json` and the
    ledger still carry plain strings and `phase == "pilot"` still holds."""
    CHECKS = "checks"
    BLOCKED = "blocked"  # a failed check: spend no GPU hour on pilots or runs
    PILOT = "pilot"
    DECISION = "decision"
    RUNS = "runs"
    POST = "post"
    FINISHED = "finished"
    WRAPUP = "wrapup"
    DONE = "done"  # the bundle is built and verified; nothing is left to do on the box


@dataclass(frozen=True)
class Intent:
    """What the scheduler wants launched next: a pure decision, no process yet."""
    target: str
    kind: str  # step | pilot | run | post
    category: str
    argv: tuple[str, ...]
    gpus: int
    max_steps: int | None
    params: tuple = ()
    resumes: "Continuation | None" = None  # a run its box cut, continued by this one


@dataclass(frozen=True)
class Continuation:
    """How a run its box cut, or one `[retry]` relaunches after a hiccup, goes on: from
    its last verified checkpoint (the script reads ITERA_RESUME), or from the start under
    a new attempt when it left none."""
    run: str  # the cut (or failed) run's id
    checkpoint: str | None  # the verified checkpoint, relative to its owner's run directory
    reason: str
    retry: int | None = None  # which retry of its task this is (`[retry]`), if one
    owner: str | None = None  # whose checkpoint it is, when an earlier attempt's (else `run`'s)


def newest_checkpoint(state: CampaignState, run: RunState,
                      held: Callable[[RunState], Verification | None] | None = None
                      ) -> tuple[RunState, Verification] | None:
    """The verified checkpoint a cut run's continuation starts from, and whose it is: the
    run's own (`held`: what this box holds of a run, by default `resume_verified`), unless
    an earlier attempt of the same task (the same config) holds one at a later step. On a
    second move (box A cut c1 at its checkpoint 180, box B's c2 was cut before any of its
    own reached the store) c2 holds nothing, and c1's checkpoint at 180 is still the
    newest. Steps decide; an own checkpoint whose step is unknown is kept."""
    held = held or (lambda r: r.resume_verified)
    own = held(run)
    best = (run, own) if own is not None and own.path else None
    best_step = run.step_of(own.path) if best is not None else None
    if best is not None and best_step is None:
        return best
    for other in state.runs_of(run.target, run.kind):
        if other.id == run.id or other.config_hash != run.config_hash:
            continue
        verdict = held(other)
        step = other.step_of(verdict.path) if verdict is not None and verdict.path else None
        if step is not None and (best_step is None or step > best_step):
            best, best_step = (other, verdict), step
    return best


def continuation(state: CampaignState, target: str, kind: str) -> Continuation | None:
    """The latest run of `target` was cut by its box, or failed on a hiccup `[retry]`
    relaunches (tui.engine.retry): how the next one continues it."""
    run = _latest(state, target, kind)
    if run is not None and run.to_retry:
        return _retry(state, run)
    if run is None or run.state != RunStatus.CUT:
        return None
    found = newest_checkpoint(state, run)
    if found is not None:
        owner, last = found
        step = owner.step_of(last.path)
        at = f" at step {step}" if step is not None else f" {last.path}"
        whose = "its" if owner is run else f"{owner.id}'s (an earlier attempt's, newer)"
        return Continuation(run.id, last.path, f"its box went away; offered {whose} verified "
                            f"checkpoint{at} to resume from (ITERA_RESUME)",
                            owner=None if owner is run else owner.id)
    return Continuation(run.id, None, "its box went away and no verified checkpoint of it "
                        "is here: started over")


def _retry(state: CampaignState, run) -> Continuation:
    """A failed run `[retry]` relaunches: from its last verified checkpoint, as its next
    retry (the words its `run_exited` gave: "retry 1 of 2 after exit -9 ...")."""
    last = run.resume_verified
    step = run.step_of(last.path) if last is not None and last.path else None
    at = f" at step {step}" if step is not None else (f" {last.path}" if last else "")
    where = (f"resumes from the verified checkpoint{at}"
             if last is not None and last.path else "no verified checkpoint of it: "
             "started over")
    return Continuation(run.id, last.path if last is not None and last.path else None,
                        f"{run.retried}; {where}",
                        retries_made(state, run.target, run.kind) + 1)


def _to_launch(state: CampaignState, target: str, kind: str) -> bool:
    """Never launched, cut by its box (a cut run is continued, never left behind), or
    failed on a hiccup `[retry]` relaunches (once its checkpoints have their verdicts)."""
    run = _latest(state, target, kind)
    if run is not None and run.to_retry:
        return not run.verifying  # from its last verified checkpoint: wait for the verdict
    return run is None or run.state == RunStatus.CUT


def _latest(state: CampaignState, target: str, kind: str):
    runs = state.runs_of(target, kind)
    return runs[-1] if runs else None


def _done(state, target, kind) -> bool:
    run = _latest(state, target, kind)
    return run is not None and run.state in TERMINAL and not run.to_retry


def _live(plan: Plan, state: CampaignState, share: BoxShare | None) -> list:
    return [v for v in plan.variants if v.id not in state.dropped
            and (share is None or v.id in share.variants)]


def _steps(plan: Plan, share: BoxShare | None):
    if share is not None and not share.runs_steps:
        return [], []  # the steps run on the first box
    return plan.split_steps()


def phase_of(plan: Plan, state: CampaignState, share: BoxShare | None = None) -> Phase:
    """The campaign's `Phase`, a pure function of the plan and the replayed state.
    `share`: the box's share of a campaign over several boxes (None: everything)."""
    if state.wrapup:
        return Phase.DONE if state.wrapup.state == "done" else Phase.WRAPUP
    pre, post = _steps(plan, share)
    if not all(_step_done(state, s) for s in pre):
        return Phase.CHECKS
    if blocking_steps(plan, state):
        return Phase.BLOCKED
    live = _live(plan, state, share)
    if plan.pilot is not None:
        if not all(_done(state, v.id, "pilot") for v in live):
            return Phase.PILOT
        if state.decided is None:
            return Phase.DECISION
        if state.decided.decision == "wrapup":
            return Phase.FINISHED if not state.running else Phase.RUNS
    if not all(_done(state, v.id, "run") for v in live):
        return Phase.RUNS
    if not all(_step_done(state, s, "post") for s in post):
        return Phase.POST
    return Phase.FINISHED if not state.running else Phase.RUNS


def blocking_steps(plan: Plan, state: CampaignState) -> list:
    """Pre-pilot machine steps (data check, resume check...) that ended badly."""
    out = []
    for step in plan.split_steps()[0]:
        run = _latest(state, step.id, "step")
        if run is not None and run.state in TERMINAL and run.state != RunStatus.COMPLETED \
                and not run.to_retry:
            out.append(run)
    return out


def _step_done(state, step, kind="step") -> bool:
    if step.who == "human" or not step.command:
        return True  # preparation time in the calendar, not driven by the engine
    return _done(state, step.id, kind)


def next_intents(plan: Plan, state: CampaignState,
                 share: BoxShare | None = None) -> list[Intent]:
    """Everything that could start now, in priority order (lanes decide who does)."""
    if state.paused or state.wrapup:
        return []
    phase = phase_of(plan, state, share)
    pre, post = _steps(plan, share)
    if phase == Phase.CHECKS:
        return [Intent(s.id, "step", "mandatory", s.command, s.gpus, None,
                       resumes=continuation(state, s.id, "step"))
                for s in pre if s.command and s.who == "machine"
                and _to_launch(state, s.id, "step")
                and all(_dep_done(plan, state, d, "step", share) for d in s.after)]
    live = sorted(_live(plan, state, share),
                  key=lambda v: (CATEGORY_RANK[v.category], v.priority))
    if phase == Phase.PILOT:
        return [Intent(v.id, "pilot", v.category, v.command, v.gpus, plan.pilot.steps,
                       v.params, continuation(state, v.id, "pilot"))
                for v in live if _to_launch(state, v.id, "pilot")]
    if phase == Phase.RUNS and not (state.decided and state.decided.decision == "wrapup"):
        return [Intent(v.id, "run", v.category, v.command, v.gpus, None, v.params,
                       continuation(state, v.id, "run"))
                for v in live if _to_launch(state, v.id, "run")
                and all(_dep_done(plan, state, d, "run", share) for d in v.after)]
    if phase == Phase.POST:
        return [Intent(s.id, "post", "mandatory", s.command, s.gpus, None,
                       resumes=continuation(state, s.id, "post"))
                for s in post if s.command and s.who == "machine"
                and _to_launch(state, s.id, "post")
                and all(_dep_done(plan, state, d, "run", share) for d in s.after)]
    return []


def _dep_done(plan: Plan, state: CampaignState, dep: str, kind: str,
              share: BoxShare | None = None) -> bool:
    """Is `dep` (a variant's full run, or a step of either phase) finished?
    A dependency in another box's share counts as done here (`check` warns)."""
    if dep in state.dropped:
        return True
    try:
        step = plan.step(dep)
    except KeyError:
        if share is not None and dep not in share.variants:
            return True
        return _done(state, dep, kind)
    if share is not None and not share.runs_steps:
        return True
    return _step_done(state, step, "post" if step.id in plan.post_step_ids() else "step")
