"""The work a box's end cost: what each cut run's continuation redid, from the records.

A run its box cut (a move, a box that announced its end) is continued by a later
attempt, offered its last verified checkpoint (ITERA_RESUME). What was lost is
what the continuation did again: from the step its own records began at (its
first `run_progress`) to the step the cut run's records had reached (its last
one, or a later checkpoint's step). A script that ignores ITERA_RESUME begins at
step 0 whatever was offered, and so lost everything: said so, with the checkpoint
it was offered. Before the continuation's first record the figure is what it
will redo if it resumes as offered. A pure function of the replayed state: the
one wording `status`, the room, the notices and the report all print.

How far a cut run got is known exactly only when the engine saw it exit (its last
`run_progress` is written as it exits: a box that announced its end). A box that
died without a word took its last minutes along: the ledger the store holds says
only where the run was at its last mark or checkpoint, a lower bound, and every
figure built on it says "at least" (the trial's "0 steps of the 180 it had
reached" was a run at step 197 whose last word in the ledger was step 180).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..campaign.units import human_duration
from .ledger.state import CampaignState, RunState, RunStatus
from .scheduler import newest_checkpoint


@dataclass(frozen=True)
class CutRun:
    """One run a box cut, as every view names it: what was redone and who continued it."""
    run: str
    target: str
    cut_t: float | None
    checkpoint_step: int | None  # the verified checkpoint its continuation was offered
    lost_s: float | None  # its training time that was (or will be) done again
    continued_by: str | None
    reached_step: int | None = None  # the newest step its records reached (None: unknown)
    started_step: int | None = None  # where the continuation's records began (None: not yet)
    lost_steps: int | None = None  # steps done again: reached_step less where it began
    ignored_checkpoint: bool = False  # began below the checkpoint it was offered
    # reached_step is only a lower bound: its box died without a word, so the steps after
    # its last mark in the ledger are not known (else: it exited, its last mark is exact)
    at_least: bool = False
    offered_by: str | None = None  # whose checkpoint was offered, when an earlier attempt's

    @property
    def counted(self) -> bool:
        """From the continuation's own records (else: what it will redo as offered)."""
        return self.started_step is not None

    def lost_text(self) -> str:
        steps = (f"{self.lost_steps} step{'s' if self.lost_steps != 1 else ''}"
                 if self.lost_steps is not None else None)
        time = human_duration(self.lost_s) if self.lost_s is not None else None
        if self.at_least:  # its box died without a word: what is known is a floor
            if not self.lost_steps:
                steps = None  # no step known past where it begins: the steps are unknown
            said = f"{steps} ({time})" if steps and time else steps or (
                f"{time} of training" if time else None)
            return f"at least {said}" if said else "an unknown amount"
        if steps and time:
            return f"{steps} ({time})"
        return steps or time or "an unknown amount"

    def _reached(self) -> str:
        """How far it got, as far as it is known."""
        if self.reached_step is None:
            return ""
        if self.at_least:
            return f" (its box died at step {self.reached_step} or later)"
        return f" of the {self.reached_step} it had reached" \
            if self.lost_steps != self.reached_step else ""

    def line(self) -> str:
        whose = f"{self.offered_by}'s" if self.offered_by else "its"
        offered = (f"{whose} verified checkpoint at step {self.checkpoint_step}"
                   if self.checkpoint_step is not None else None)
        reached = self._reached()
        head = f"{self.run} ({self.target}): "
        if self.continued_by is None:
            where = offered or "the start (no verified checkpoint)"
            return f"{head}not continued yet; it will redo {self.lost_text()}{reached} from {where}"
        if not self.counted:
            where = f"from {offered}" if offered else "from the start (no verified checkpoint)"
            return (f"{head}{self.lost_text()} of training lost; continued by "
                    f"{self.continued_by} {where}")
        if self.ignored_checkpoint:
            how = (f"restarted from step {self.started_step} although {offered} was "
                   "offered (ITERA_RESUME ignored)")
        elif offered:
            how = f"resumed at step {self.started_step} from {offered}"
        else:
            how = f"started over at step {self.started_step} (no verified checkpoint)"
        return (f"{head}{self.lost_text()}{reached} redone; continued by {self.continued_by}, "
                f"which {how}")

    def to_dict(self) -> dict:
        return asdict(self) | {"text": self.line()}


def cut_runs(state: CampaignState) -> list[CutRun]:
    """Every run a box cut (shut down or dead), with the work its continuation redid."""
    return [cut_run(state, run) for run in state.runs if run.state == RunStatus.CUT]


def cut_run(state: CampaignState, run: RunState) -> CutRun:
    follower = next((r for r in state.runs if r.resumes == run.id), None)
    if follower is not None:  # its checkpoint, or an earlier attempt's newer one
        offered = follower.resume_from
        owner = next((r for r in state.runs if r.id == follower.resume_run), run)
    else:  # what the scheduler will offer (tui.engine.scheduler)
        found = newest_checkpoint(state, run)
        owner, offered = (found[0], found[1].path) if found is not None else (run, None)
    checkpoint_step = owner.step_of(offered) if offered else None
    started = follower.first_step if follower is not None else None
    # where the work done again begins: the continuation's first record, else what it is offered
    begin = started if started is not None else (checkpoint_step if offered else None)
    reached = _reached(run)
    lost_steps = None
    if reached is not None:
        lost_steps = max(0, reached - (begin if begin is not None else (run.first_step or 0)))
    since = _time_at(run, begin)
    lost_s = None if run.ended_t is None or since is None else max(0.0, run.ended_t - since)
    return CutRun(run.id, run.target, run.ended_t, checkpoint_step, lost_s,
                  follower.id if follower else None, reached, started, lost_steps,
                  started is not None and checkpoint_step is not None
                  and started < checkpoint_step, reached is not None and not run.exited,
                  owner.id if owner is not run else None)


def _reached(run: RunState) -> int | None:
    """The newest step known of the run: its records' last mark, or a later checkpoint
    (None without a mark: a ledger from before run_progress knows no step it reached)."""
    if run.reached_step is None:
        return None
    steps = [s for s in (run.reached_step, *(a.step for a in run.checkpoints),
                         *(v.step for v in run.verified if v.ok)) if s is not None]
    return max(steps) if steps else None


def _time_at(run: RunState, step: int | None) -> float | None:
    """When the run was last known at or before `step`: the newest checkpoint it
    acknowledged at a step not past it, else its launch (work redone from the start)."""
    if step is not None and (run.first_step is None or step > run.first_step):
        acks = [a.t for a in run.checkpoints if a.step is not None and a.step <= step]
        if acks:
            return max(acks)
    return run.launched_t
