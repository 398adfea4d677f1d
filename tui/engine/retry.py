"""`[retry]` in the engine: whether a run that just failed is relaunched, and why not.

Decided once, when the run's exit is recorded: the answer rides on its
`run_exited` (`retried`, or `not_retried` for a hiccup left failed), so the
scheduler stays a pure function of the plan and the replayed state, continues
the run from its last verified checkpoint (`scheduler.continuation`, the path a
cut run takes: ITERA_RESUME) under a new attempt with its own id, and a restart
never decides twice. A run stopped by a rule, a person, the pilot's bound or the
wrap-up is never retried, nor one whose box is going down (it is cut and
continued anyway), nor any once the wrap-up has begun; a retry is made only
while the window, less the wrap-up's reserve, can fit what the attempt still
has to do (the plan's hours for it, less the share its checkpoint holds).
`decide` is pure; `retry_fields` gathers its inputs from the run's files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..campaign.calendar import pilot_hours
from ..campaign.plan import Plan
from ..campaign.retry import RetryPolicy
from ..campaign.units import human_duration
from .conclusion.crash import tail_lines
from .ledger.state import CampaignState, RunState
from .reading.regular_files import open_regular

LAST_LINES = 40  # of each stream: where a launcher or a driver says what killed the run


@dataclass(frozen=True)
class RetryDecision:
    """What `[retry]` makes of one failed run: relaunched (why), left failed (why), or
    nothing to say (no hiccup, or not a failure at all)."""
    retried: str | None = None
    not_retried: str | None = None

    def fields(self) -> dict:
        """The `run_exited` fields that carry it (none when there is nothing to say)."""
        return {k: v for k, v in (("retried", self.retried),
                                  ("not_retried", self.not_retried)) if v is not None}


def decide(policy: RetryPolicy | None, run: RunState, exit_code: int | None,
           last_lines, retries_made: int, ending: str | None = None,
           needed_s: float | None = None, left_s: float | None = None) -> RetryDecision:
    """The one decision, pure. `run`: as it stood before its exit (its stop, its stop
    request); `retries_made`: retries of its task so far; `ending`: why nothing is
    relaunched any more (the wrap-up has begun); `needed_s`/`left_s`: what the attempt
    still has to do and what the window has left before the wrap-up (None: unknown)."""
    if policy is None or not policy.active or exit_code == 0:
        return RetryDecision()
    if run.stop is not None or run.stop_requested is not None:
        return RetryDecision()  # a rule, a person, the pilot's bound or the wrap-up ended it
    cause = policy.hiccup(exit_code, last_lines)
    if cause is None:
        return RetryDecision()
    if ending:
        return RetryDecision(not_retried=f"{cause}; {ending}")
    if retries_made >= policy.max:
        return RetryDecision(not_retried=f"{cause}; its {policy.max} "
                             f"retr{'y' if policy.max == 1 else 'ies'} already made")
    if needed_s is not None and left_s is not None and needed_s > left_s:
        return RetryDecision(not_retried=(
            f"{cause}; the window cannot fit another attempt: it needs about "
            f"{human_duration(needed_s)}, {human_duration(max(0.0, left_s))} is left "
            "before the wrap-up"))
    return RetryDecision(retried=f"retry {retries_made + 1} of {policy.max} after {cause}")


def retries_made(state: CampaignState, target: str, kind: str) -> int:
    """How many retries the task (a variant's pilot or run, a step) has had."""
    return sum(1 for r in state.runs_of(target, kind) if r.retry)


def needed_seconds(plan: Plan, run: RunState) -> float | None:
    """What another attempt still has to do: the plan's hours for it, less the share of
    its steps the checkpoint it resumes from holds (None: the plan gives no hours)."""
    try:
        variant = plan.variant(run.target)
    except KeyError:
        try:
            return plan.step(run.target).hours * 3600
        except KeyError:
            return None
    hours = pilot_hours(plan, variant) if run.kind == "pilot" else variant.hours
    steps = run.max_steps or variant.steps
    last = run.last_verified_checkpoint
    done = min(1.0, last.step / steps) if last is not None and last.step and steps else 0.0
    return hours * 3600 * (1.0 - done)


def left_seconds(plan: Plan, state: CampaignState, now: float) -> float | None:
    """The window left to runs: its end, less the wrap-up's and the retrieval's reserve."""
    if state.window_end is None:
        return None
    reserve = plan.campaign.wrapup_hours + plan.campaign.retrieval_hours
    return state.window_end - now - reserve * 3600


def ending(plan: Plan, state: CampaignState, run: RunState) -> str | None:
    """Why nothing is relaunched any more, whatever the hiccup."""
    if state.wrapup is not None:
        return "the wrap-up has begun"
    if run.target in state.dropped:
        return f"{run.target} was dropped"
    if run.kind == "run" and state.decided is not None and state.decided.decision == "wrapup":
        return "the decision was to wrap up"
    return None


def _open_regular(path: Path):
    """A run's stream, opened only when it is a regular file (a FIFO never blocks us)."""
    return os.fdopen(open_regular(path), "rb")


def retry_fields(plan: Plan, state: CampaignState, run: RunState, exit_code: int | None,
                 run_dir: Path, now: float) -> dict:
    """The `run_exited` fields `[retry]` adds for a run ending now (see `decide`)."""
    policy = plan.retry_for(run.target)
    if policy is None or not policy.active or exit_code == 0 or state.box_down is not None:
        return {}  # a box going down cuts its runs: continued, never a hiccup
    lines = [line for name in ("stderr.log", "stdout.log")
             for line in tail_lines(run_dir, name, _open_regular)[-LAST_LINES:]]
    return decide(policy, run, exit_code, lines, retries_made(state, run.target, run.kind),
                  ending(plan, state, run), needed_seconds(plan, run),
                  left_seconds(plan, state, now)).fields()
