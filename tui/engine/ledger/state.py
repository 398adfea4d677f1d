"""State = replay(ledger): the campaign as the ledger tells it.

Nothing about a campaign is stored outside the ledger; this module folds its
events into frozen snapshots of small declared records (`records.py`). The
engine applies each new event to the same builder, so the live state and a
replay after a crash are the same function of the same events. An event
whose fields cannot be read is counted (and named by its seq), never a
traceback and never silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Callable, Iterable

from . import events
from .records import (BoxDown, CheckpointAck, Move, TakenDecision, DecisionPending, Readout, ResumeCheck, StopRecord,
                      StopRequest, Verification, WarningRecord, WrapupStatus, opt_text)


class RunStatus(StrEnum):
    """Where a run is: a str, so it is a plain string in JSON and the ledger, and
    `run.state == "running"` still holds."""
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    STOPPED = "stopped"
    DROPPED = "dropped"
    FAILED = "failed"
    # its box went away mid-run (shut down, reclaimed, dead): not its fault and not an
    # end; the next engine continues it under a new attempt (from its last verified
    # checkpoint when it has one)
    CUT = "cut"


RUN_STATES = tuple(RunStatus)
TERMINAL = (RunStatus.COMPLETED, RunStatus.STOPPED, RunStatus.FAILED, RunStatus.DROPPED)
PILOT_ENDS = ("pilot", "pilot_bound")  # a pilot stopped at its bound ends by design
PERSON_STOPS = ("user", "wrapup") + PILOT_ENDS
INFERRED = events.DecidedBy.INFERRED  # a TakenDecision whose decision_taken line was lost


@dataclass(frozen=True)
class RunState:
    """One launched run as the ledger tells it: where it ran, how it ended, its checkpoints."""
    id: str
    target: str  # variant or step id
    kind: str  # step | pilot | run | post
    category: str
    attempt: int
    config_hash: str
    state: RunStatus
    launched_t: float | None = None
    ended_t: float | None = None
    pid: int | None = None
    pid_start: float | None = None
    lanes: tuple[str, ...] = ()
    devices: str = ""
    lot: str | None = None
    max_steps: int | None = None
    exit_code: int | None = None
    stop: StopRecord | None = None
    stop_requested: StopRequest | None = None
    checkpoints: tuple[CheckpointAck, ...] = ()  # acknowledged, in order
    verified: tuple[Verification, ...] = ()  # verification results
    rotated: tuple[str, ...] = ()  # paths the trainer itself removed (HF save_total_limit)
    resume_check: ResumeCheck | None = None
    readout: Readout | None = None  # what the engine read of its records, when it read all
    resumes: str | None = None  # the cut run this one continues
    resume_from: str | None = None  # the checkpoint it was given (ITERA_RESUME), if any
    resume_run: str | None = None  # whose checkpoint that is, when not `resumes`'s
    # cut by a box the campaign moved away from: the checkpoint the new box holds for it
    # (None: none reached the store); on the same box, its last verified checkpoint
    moved: bool = False
    resume_point: str | None = None
    # `[retry]`: this run is retry N of its task (why: `resume_reason`); a failed run
    # that is retried says why (`retried`), one whose hiccup is not says why not
    retry: int | None = None
    resume_reason: str | None = None
    retried: str | None = None
    not_retried: str | None = None
    # how far its own records went (run_progress): the step of the first one, and the
    # newest step the ledger saw it reach, with when (what a box that died took along)
    first_step: int | None = None
    reached_step: int | None = None
    reached_t: float | None = None
    # the engine saw it exit (`run_exited`): its last mark is where it ended; a run still
    # live when its box died without a word (cut by the move) went further than it knows
    exited: bool = False
    config: dict = field(default_factory=dict, compare=False)

    @property
    def alive(self) -> bool:
        return self.state == RunStatus.RUNNING

    @property
    def rules_apply(self) -> bool:
        """Whether its records still face the stop rules: until a stop, and after a pilot's
        bound too (a script that ignores the stop request keeps printing; a NaN there is
        the pilot's, recorded on it)."""
        return self.stop is None or self.stop.rule in PILOT_ENDS

    @property
    def rule_step(self) -> int | None:
        """The step its stop was taken at (a rule's, or a person's), the step every view
        shows for a stopped run: a script that ignores SIGTERM prints on through its grace,
        and those later steps are not where it stopped. None for a pilot ended at its
        bound (it ends by design), or a stop that gave no step."""
        if self.stop is None or self.stop.rule in PILOT_ENDS:
            return None
        return self.stop.step

    @property
    def verifying(self) -> bool:
        """A checkpoint it acknowledged still waits for its verdict (a retry waits for
        it: it resumes from the last VERIFIED one)."""
        judged = {v.path for v in self.verified} | set(self.rotated)
        return any(c.path not in judged for c in self.checkpoints)

    @property
    def to_retry(self) -> bool:
        """Failed on a hiccup that `[retry]` relaunches: not an end while it waits."""
        return self.state == RunStatus.FAILED and self.retried is not None

    @property
    def last_verified_checkpoint(self) -> Verification | None:
        ok = [v for v in self.verified if v.ok and v.path not in self.rotated]
        return ok[-1] if ok else None

    def verdict_of(self, ack: CheckpointAck) -> Verification | None:
        """The last verdict about this acknowledgement's bytes (see `_same_save`)."""
        return next((v for v in reversed(self.verified) if _same_save(ack, v)), None)

    def saved_over(self, ack: CheckpointAck) -> bool:
        """Whether a later save of the same file came before this one's verdict: it is
        never verified (the verifier takes the newest save waiting), and is no failure."""
        later = self.checkpoints[self.checkpoints.index(ack) + 1:] if ack in self.checkpoints \
            else ()
        return self.verdict_of(ack) is None and any(a.path == ack.path for a in later)

    @property
    def resume_verified(self) -> Verification | None:
        """The verified checkpoint a cut run continues from on this box, or None: its last
        verified one; after a move, only the one fetched from the store."""
        if not self.moved:
            return self.last_verified_checkpoint
        if self.resume_point is None:
            return None
        return next((v for v in reversed(self.verified) if v.ok and v.path == self.resume_point),
                    None)

    def step_of(self, path: str | None) -> int | None:
        """The step of one of its checkpoints: as verified, else as acknowledged (a watched
        file's step comes from the records it was written after)."""
        for v in reversed(self.verified):
            if v.path == path and v.step is not None:
                return v.step
        return next((a.step for a in reversed(self.checkpoints)
                     if a.path == path and a.step is not None), None)

    @property
    def why_ended(self) -> str:
        """The stop reason, or the exit status: one wording for every view."""
        if self.stop is not None and self.stop.reason:
            return self.stop.reason
        if self.state == RunStatus.CUT:
            return "cut: its box went away mid-run (continued on the next box)"
        return f"exit status {self.exit_code}"

    def to_dict(self) -> dict:
        last = self.last_verified_checkpoint
        return {"id": self.id, "variant": self.target, "kind": self.kind,
                "category": self.category, "attempt": self.attempt,
                "config_hash": self.config_hash, "state": self.state,
                "stop": self.stop.to_dict() if self.stop else None,
                "exit_code": self.exit_code, "launched_t": self.launched_t,
                "ended_t": self.ended_t, "pid": self.pid, "lanes": list(self.lanes),
                "devices": self.devices, "max_steps": self.max_steps,
                "checkpoints": len(self.checkpoints),
                "last_verified_checkpoint": last.to_dict() if last else None,
                "resumes": self.resumes, "resume_from": self.resume_from,
                **self.retry_dict()}

    def retry_dict(self) -> dict:
        """`[retry]`'s words on this run, for `status --json` and the bundle: present
        only when there are some (a campaign without a hiccup prints what it always did)."""
        said = {"retry": self.retry, "resume_reason": self.resume_reason if self.retry else None,
                "retried": self.retried, "not_retried": self.not_retried,
                "retry_text": self.retry_text or None}
        return {k: v for k, v in said.items() if v is not None}

    @property
    def retry_text(self) -> str:
        """`[retry]`'s words on this run, one wording for the room, `status` and the report:
        a retry and where it resumed, a failure whose retry follows, or why a hiccup was
        not retried ("" when it has nothing to do with `[retry]`)."""
        if self.retry:
            return self.resume_reason or f"retry {self.retry}"
        if self.retried:
            return f"{self.retried} follows"
        return f"not retried: {self.not_retried}" if self.not_retried else ""


def _same_save(ack: CheckpointAck, verdict: Verification) -> bool:
    """Whether a verdict is about this acknowledgement: its path, and its bytes where both
    name a sha256 (a file saved again in place is acknowledged once per save)."""
    if ack.path != verdict.path:
        return False
    return ack.sha256 is None or verdict.sha256 is None or ack.sha256 == verdict.sha256


@dataclass(frozen=True)
class CampaignState:
    """The whole campaign replayed from the ledger: the one source both faces show."""
    runs: tuple[RunState, ...] = ()
    started_t: float | None = None
    window_start: float | None = None
    window_end: float | None = None
    plan_sha256: str | None = None
    decisions: tuple[TakenDecision, ...] = ()
    decision_pending: DecisionPending | None = None
    dropped: frozenset = frozenset()
    paused: bool = False
    wrapup: WrapupStatus | None = None
    warnings: tuple[WarningRecord, ...] = ()
    host: str | None = None  # the box the last engine ran on (engine_started)
    box_down: BoxDown | None = None  # the box announced its end (cleared by a move)
    moves: tuple[Move, ...] = ()  # boxes the campaign continued on (`itera-tui resume`)
    events: int = 0
    unreadable: tuple[int, ...] = ()  # seq of events whose fields could not be read

    def run(self, run_id: str) -> RunState:
        for r in self.runs:
            if r.id == run_id:
                return r
        raise KeyError(run_id)

    def runs_of(self, target: str, kind: str | None = None) -> list[RunState]:
        return [r for r in self.runs if r.target == target and (kind is None or r.kind == kind)]

    @property
    def running(self) -> list[RunState]:
        return [r for r in self.runs if r.state == RunStatus.RUNNING]

    @property
    def decided(self) -> TakenDecision | None:
        return self.decisions[-1] if self.decisions else None


_HANDLERS: dict[type, Callable] = {}


def _handles(*kinds: type[events.Event]):
    """Register a StateBuilder method as the fold of these event classes."""
    def register(method):
        for kind in kinds:
            _HANDLERS[kind] = method
        return method
    return register


class StateBuilder:
    """Folds ledger events into a CampaignState, one event at a time."""

    def __init__(self):
        self.state = CampaignState()
        self._runs: dict[str, RunState] = {}
        self._frozen: CampaignState | None = None

    def apply(self, ev: events.Event | dict) -> None:
        """Fold one event; a JSON object (a test's, an old caller's) is read as the ledger
        reads a line, and one that is not an event counts as unreadable."""
        if isinstance(ev, dict):
            try:
                ev = events.parse(ev)
            except (ValueError, KeyError, TypeError):
                seq = ev.get("seq")
                self.state = replace(self.state, events=self.state.events + 1,
                                     unreadable=self.state.unreadable + (
                                         seq if isinstance(seq, int) else -1,))
                self._frozen = None
                return
        handler = _HANDLERS.get(type(ev))
        if handler is not None:
            try:
                handler(self, ev)
            except (KeyError, TypeError, ValueError, AttributeError):
                self.state = replace(self.state, unreadable=self.state.unreadable + (ev.seq,))
        self.state = replace(self.state, events=self.state.events + 1)
        self._frozen = None

    def freeze(self) -> CampaignState:
        """The state as of the last event; built once per event, not per read (the
        engine reads it many times a tick)."""
        if self._frozen is None:
            self._frozen = replace(self.state, runs=tuple(self._runs.values()))
        return self._frozen

    def _update(self, run_id: str, **changes) -> None:
        if run_id in self._runs:
            self._runs[run_id] = replace(self._runs[run_id], **changes)
            self._frozen = None

    @_handles(events.CampaignStarted)
    def _on_campaign_started(self, ev: events.CampaignStarted):
        self.state = replace(self.state, started_t=float(ev.t), plan_sha256=ev.plan_sha256)

    @_handles(events.WindowStarted)
    def _on_window_started(self, ev: events.WindowStarted):
        self.state = replace(self.state, window_start=float(ev.start), window_end=float(ev.end))

    @_handles(events.RunLaunched)
    def _on_run_launched(self, ev: events.RunLaunched):
        self._runs[ev.run] = RunState(
            id=ev.run, target=ev.target, kind=str(ev.kind), category=ev.category,
            attempt=ev.attempt, config_hash=ev.config_hash, state=RunStatus.RUNNING,
            launched_t=float(ev.t), pid=ev.pid, pid_start=ev.pid_start,
            lanes=tuple(ev.lanes or ()), devices=ev.devices or "", lot=ev.lot,
            max_steps=ev.max_steps, config=dict(ev.config or {}), resumes=ev.resumes,
            resume_from=ev.resume_from, resume_run=ev.resume_run, retry=ev.retry,
            resume_reason=opt_text(ev.resume_reason))
        if ev.kind == events.RunKind.RUN:  # a full run starts only once the decision is taken
            self._decision_lost(ev, events.DecisionKind.CONTINUE)

    @_handles(events.RunSkipped)
    def _on_run_skipped(self, ev: events.RunSkipped):
        rid = f"{ev.target}-{ev.kind}-skipped"
        self._runs[rid] = RunState(
            id=rid, target=ev.target, kind=str(ev.kind), category=ev.category or "",
            attempt=0, config_hash="", state=RunStatus.FAILED, launched_t=None,
            ended_t=float(ev.t),
            stop=StopRecord("window", opt_text(ev.reason), None, None, float(ev.t)))

    @_handles(events.StopRuleFired)
    def _on_stop_rule_fired(self, ev: events.StopRuleFired):
        run = self._runs.get(ev.run)
        if run and run.rules_apply:  # a rule past a pilot's bound replaces the bound
            self._update(ev.run, stop=StopRecord.from_event(ev))

    @_handles(events.RunStopRequested)
    def _on_run_stop_requested(self, ev: events.RunStopRequested):
        run = self._runs.get(ev.run)
        if run is None:
            return
        changes = {"stop_requested": StopRequest(ev.by, opt_text(ev.reason), float(ev.t),
                                                 ev.deadline, term_at=ev.term_at,
                                                 termed=ev.term_at is None)}
        if run.stop is None and ev.by in PERSON_STOPS:
            changes["stop"] = StopRecord.from_event(ev, rule=ev.by)
        self._update(ev.run, **changes)

    @_handles(events.RunExited)
    def _on_run_exited(self, ev: events.RunExited):
        run = self._runs.get(ev.run)
        if run is None:
            return
        code = ev.exit_code
        if run.stop is not None and run.stop.rule in PILOT_ENDS:
            state = RunStatus.COMPLETED  # a pilot stopped at its bound or time box: by design
        elif run.stop is not None:
            state = RunStatus.STOPPED
        elif self._cut_by_box(run, ev):
            state = RunStatus.CUT
        else:
            state = RunStatus.COMPLETED if code == 0 else RunStatus.FAILED
        retried = opt_text(ev.retried) if state == RunStatus.FAILED else None
        self._update(ev.run, state=state, exit_code=code, ended_t=float(ev.t), exited=True,
                     readout=Readout.from_event(ev), retried=retried,
                     not_retried=opt_text(ev.not_retried))

    def _cut_by_box(self, run: RunState, ev: events.RunExited) -> bool:
        """Live when the box announced its end, and ended by that signal (not a clean
        exit of its own): cut, not failed. A run that finished cleanly meanwhile is done."""
        down = self.state.box_down
        if down is None or run.id not in down.runs:
            return False
        return ev.exit_code != 0 or ev.signaled is True

    @_handles(events.EngineStarted)
    def _on_engine_started(self, ev: events.EngineStarted):
        if ev.host is not None:
            self.state = replace(self.state, host=ev.host)

    @_handles(events.BoxGoingDown)
    def _on_box_going_down(self, ev: events.BoxGoingDown):
        self.state = replace(self.state, box_down=BoxDown.from_event(ev))

    @_handles(events.BoxCheckpointed)
    def _on_box_checkpointed(self, ev: events.BoxCheckpointed):
        if self.state.box_down is not None:
            self.state = replace(self.state, box_down=replace(
                self.state.box_down, saved=tuple(sorted(ev.saved.items())),
                unsaved=tuple(ev.unsaved)))

    @_handles(events.CampaignMoved)
    def _on_campaign_moved(self, ev: events.CampaignMoved):
        """Every run still live in the ledger ran on the old box: cut where it stood. The
        new box's rental starts now (its window), the one plan change a move makes."""
        move = Move.from_event(ev)
        fetched = ev.checkpoints or {}
        named = set(ev.cut or ())
        for rid, run in list(self._runs.items()):
            if run.state == RunStatus.RUNNING:
                self._update(rid, state=RunStatus.CUT, ended_t=move.last_t or move.t)
            elif run.state == RunStatus.COMPLETED and rid in named:
                # completed there, but the store could not prove it finished whole (its
                # results not all stored): run again here, never kept half (resume.py)
                self._update(rid, state=RunStatus.CUT)
            if self._runs[rid].state == RunStatus.CUT:
                # this box holds what was fetched now, for a run cut by an earlier move too:
                # an earlier attempt's newer checkpoint may be offered (scheduler)
                self._update(rid, moved=True, resume_point=fetched.get(rid))
        start = float(ev.t)
        wrap = self.state.wrapup
        if wrap is not None and wrap.state in ("done", "failed"):
            wrap = None  # the bundle built there stayed on the old box: built again here
        self.state = replace(self.state, moves=self.state.moves + (move,), box_down=None,
                             window_start=start, window_end=start + move.window_hours * 3600,
                             wrapup=wrap)

    @_handles(events.RunProgress)
    def _on_run_progress(self, ev: events.RunProgress):
        run = self._runs.get(ev.run)
        if run is None:
            return
        first = run.first_step if run.first_step is not None else ev.first_step
        if run.reached_step is not None and ev.step < run.reached_step:
            self._update(ev.run, first_step=first)  # an older engine's mark read again
            return
        self._update(ev.run, first_step=first, reached_step=ev.step, reached_t=float(ev.t))

    @_handles(events.RunKilled)
    def _on_run_killed(self, ev: events.RunKilled):
        run = self._runs.get(ev.run)
        if run and run.stop_requested:
            self._update(ev.run, stop_requested=replace(run.stop_requested, killed=True))

    @_handles(events.RunTerminated)
    def _on_run_terminated(self, ev: events.RunTerminated):
        run = self._runs.get(ev.run)
        if run and run.stop_requested:
            self._update(ev.run, stop_requested=replace(run.stop_requested, termed=True))

    @_handles(events.ResumeCheckResult)
    def _on_resume_check_result(self, ev: events.ResumeCheckResult):
        self._update(ev.run, resume_check=ResumeCheck.from_event(ev))

    @_handles(events.CheckpointAcknowledged)
    def _on_checkpoint_acknowledged(self, ev: events.CheckpointAcknowledged):
        run = self._runs.get(ev.run)
        if run:
            self._update(ev.run, checkpoints=run.checkpoints + (CheckpointAck.from_event(ev),))

    @_handles(events.CheckpointVerified)
    def _on_checkpoint_verified(self, ev: events.CheckpointVerified):
        run = self._runs.get(ev.run)
        if run:
            verdict = Verification.from_event(ev)
            # a watched file whose name carries no step: the step its training state holds
            # (a Lightning checkpoint's global_step, an HF trainer_state.json), as verified;
            # of a file saved again in place, only the save whose bytes it read
            acks = tuple(replace(a, step=verdict.step) if a.step is None and verdict.ok
                         and verdict.step is not None and _same_save(a, verdict) else a
                         for a in run.checkpoints)
            self._update(ev.run, verified=run.verified + (verdict,), checkpoints=acks)

    @_handles(events.CheckpointRotated)
    def _on_checkpoint_rotated(self, ev: events.CheckpointRotated):
        run = self._runs.get(ev.run)
        if run and ev.path not in run.rotated:
            step = ev.step
            acks = tuple(replace(a, step=int(step)) if a.step is None and a.path == ev.path
                         and isinstance(step, (int, float)) else a for a in run.checkpoints)
            self._update(ev.run, rotated=run.rotated + (ev.path,), checkpoints=acks)

    @_handles(events.DecisionAsked)
    def _on_decision_pending(self, ev: events.DecisionAsked):
        self.state = replace(self.state, decision_pending=DecisionPending(
            float(ev.t), ev.pilot or {}, None if ev.deadline is None else float(ev.deadline),
            ev.default, ev.auto))

    @_handles(events.DecisionTaken)
    def _on_decision_taken(self, ev: events.DecisionTaken):
        record = TakenDecision(float(ev.t), str(ev.decision), tuple(ev.drop or ()), ev.by,
                          opt_text(ev.note), self.state.decision_pending.t
                          if self.state.decision_pending is not None else None)
        self.state = replace(self.state, decisions=self.state.decisions + (record,),
                             decision_pending=None)

    @_handles(events.VariantDropped)
    def _on_variant_dropped(self, ev: events.VariantDropped):
        self.state = replace(self.state, dropped=self.state.dropped | {ev.variant})
        if (ev.reason or "").startswith(events.DROPPED_BY_DECISION):
            self._decision_lost(ev, events.DecisionKind.DROP, ev.variant)

    def _decision_lost(self, ev: events.Event, decision: str, drop: str | None = None) -> None:
        """An event that only follows a decision, while the ledger still waits for one:
        its decision_taken line was lost (deleted). The decision is read from what
        followed it (named by INFERRED, warned once by the engine), never asked again."""
        pending, last = self.state.decision_pending, self.state.decided
        if pending is None:
            if drop and last is not None and last.by == INFERRED and last.decision == "drop" \
                    and drop not in last.drop:  # the next variant of the same lost drop
                self.state = replace(self.state, decisions=self.state.decisions[:-1] + (
                    replace(last, drop=last.drop + (drop,)),))
            return
        record = TakenDecision(float(ev.t), str(decision), (drop,) if drop else (), INFERRED,
                          "its decision_taken line is missing from the ledger")
        self.state = replace(self.state, decisions=self.state.decisions + (record,),
                             decision_pending=None)

    @_handles(events.QueuePaused)
    def _on_queue_paused(self, ev: events.QueuePaused):
        self.state = replace(self.state, paused=True)

    @_handles(events.QueueResumed)
    def _on_queue_resumed(self, ev: events.QueueResumed):
        self.state = replace(self.state, paused=False)

    def _warn(self, t: float, message: str) -> None:
        warnings = self.state.warnings + (WarningRecord(float(t), opt_text(message) or ""),)
        self.state = replace(self.state, warnings=warnings[-200:])

    @_handles(events.WarningEvent)
    def _on_warning(self, ev: events.WarningEvent):
        self._warn(ev.t, ev.message)

    @_handles(events.StoreDown)
    def _on_store_down(self, ev: events.StoreDown):  # the store went away: a warning on every face
        self._warn(ev.t, f"store {ev.url} unreachable: {ev.message} (runs go on; the mirror "
                         "retries and catches up)")

    @_handles(events.StoreAtRisk)
    def _on_store_at_risk(self, ev: events.StoreAtRisk):
        self._warn(ev.t, f"delivery at risk: {ev.message}")

    @_handles(events.StoreDelivered)
    def _on_store_delivered(self, ev: events.StoreDelivered):
        if not ev.verified:
            failed = "; ".join((ev.problems or ())[:3])
            self._warn(ev.t, f"bundle at {ev.url} did NOT verify there: {failed}")

    @_handles(events.WrapupStarted)
    def _on_wrapup_started(self, ev: events.WrapupStarted):
        self.state = replace(self.state, wrapup=WrapupStatus("started", float(ev.t),
                                                             float(ev.t)))

    @_handles(events.WrapupDone)
    def _on_wrapup_done(self, ev: events.WrapupDone):
        started = self.state.wrapup.started_t if self.state.wrapup else None
        self.state = replace(self.state, wrapup=WrapupStatus(
            "done" if ev.verified else "failed", float(ev.t), started, ev.bundle,
            ev.verified is True, int(ev.failures or 0), ev.bytes,
            tuple(sorted((ev.unverified or {}).items()))))


def replay(ledger_events: Iterable[events.Event | dict]) -> CampaignState:
    builder = StateBuilder()
    for ev in ledger_events:
        builder.apply(ev)
    return builder.freeze()
