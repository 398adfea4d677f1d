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
from typing import Iterable

from .records import (BoxDown, CheckpointAck, Move, Decision, DecisionPending, Readout, ResumeCheck, StopRecord,
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
INFERRED = "inferred"  # a Decision whose decision_taken line was lost, read from what followed


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
    # cut by a box the campaign moved away from: the checkpoint the new box holds for it
    # (None: none reached the store); on the same box, its last verified checkpoint
    moved: bool = False
    resume_point: str | None = None
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
    def last_verified_checkpoint(self) -> Verification | None:
        ok = [v for v in self.verified if v.ok and v.path not in self.rotated]
        return ok[-1] if ok else None

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
                "resumes": self.resumes, "resume_from": self.resume_from}


@dataclass(frozen=True)
class CampaignState:
    """The whole campaign replayed from the ledger: the one source both faces show."""
    runs: tuple[RunState, ...] = ()
    started_t: float | None = None
    window_start: float | None = None
    window_end: float | None = None
    plan_sha256: str | None = None
    decisions: tuple[Decision, ...] = ()
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
    def decided(self) -> Decision | None:
        return self.decisions[-1] if self.decisions else None


class StateBuilder:
    """Folds ledger events into a CampaignState, one event at a time."""

    def __init__(self):
        self.state = CampaignState()
        self._runs: dict[str, RunState] = {}
        self._frozen: CampaignState | None = None

    def apply(self, ev: dict) -> None:
        handler = getattr(self, f"_on_{ev.get('event')}", None)
        if handler is not None:
            try:
                handler(ev)
            except (KeyError, TypeError, ValueError, AttributeError):
                seq = ev.get("seq")
                self.state = replace(self.state, unreadable=self.state.unreadable + (
                    seq if isinstance(seq, int) else -1,))
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

    def _on_campaign_started(self, ev):
        self.state = replace(self.state, started_t=float(ev["t"]),
                             plan_sha256=ev.get("plan_sha256"))

    def _on_window_started(self, ev):
        self.state = replace(self.state, window_start=float(ev["start"]),
                             window_end=float(ev["end"]))

    def _on_run_launched(self, ev):
        rid = str(ev["run"])
        self._runs[rid] = RunState(
            id=rid, target=str(ev["target"]), kind=str(ev["kind"]),
            category=str(ev["category"]), attempt=int(ev["attempt"]),
            config_hash=str(ev["config_hash"]), state=RunStatus.RUNNING, launched_t=float(ev["t"]),
            pid=ev.get("pid"), pid_start=ev.get("pid_start"),
            lanes=tuple(str(x) for x in ev.get("lanes") or ()),
            devices=str(ev.get("devices") or ""), lot=ev.get("lot"),
            max_steps=ev.get("max_steps"), config=dict(ev.get("config") or {}),
            resumes=ev.get("resumes"), resume_from=ev.get("resume_from"))
        if ev["kind"] == "run":  # a full run starts only once the decision is taken
            self._decision_lost(ev, "continue")

    def _on_run_skipped(self, ev):
        rid = f"{ev['target']}-{ev['kind']}-skipped"
        self._runs[rid] = RunState(
            id=rid, target=str(ev["target"]), kind=str(ev["kind"]),
            category=str(ev.get("category", "")), attempt=0, config_hash="", state=RunStatus.FAILED,
            launched_t=None, ended_t=float(ev["t"]),
            stop=StopRecord("window", opt_text(ev.get("reason")), None, None, float(ev["t"])))

    def _on_stop_rule_fired(self, ev):
        run = self._runs.get(ev["run"])
        if run and run.rules_apply:  # a rule past a pilot's bound replaces the bound
            self._update(ev["run"], stop=StopRecord.from_event(ev))

    def _on_run_stop_requested(self, ev):
        run = self._runs.get(ev["run"])
        if run is None:
            return
        by = ev.get("by")
        term_at = ev.get("term_at")
        changes = {"stop_requested": StopRequest(by, opt_text(ev.get("reason")), float(ev["t"]),
                                                 ev.get("deadline"), term_at=term_at,
                                                 termed=term_at is None)}
        if run.stop is None and by in PERSON_STOPS:
            changes["stop"] = StopRecord.from_event(ev, rule=by)
        self._update(ev["run"], **changes)

    def _on_run_exited(self, ev):
        run = self._runs.get(ev["run"])
        if run is None:
            return
        code = ev.get("exit_code")
        if run.stop is not None and run.stop.rule in PILOT_ENDS:
            state = RunStatus.COMPLETED  # a pilot stopped at its bound or time box: by design
        elif run.stop is not None:
            state = RunStatus.STOPPED
        elif self._cut_by_box(run, ev):
            state = RunStatus.CUT
        else:
            state = RunStatus.COMPLETED if code == 0 else RunStatus.FAILED
        self._update(ev["run"], state=state, exit_code=code, ended_t=float(ev["t"]),
                     readout=Readout.from_event(ev))

    def _cut_by_box(self, run: RunState, ev: dict) -> bool:
        """Live when the box announced its end, and ended by that signal (not a clean
        exit of its own): cut, not failed. A run that finished cleanly meanwhile is done."""
        down = self.state.box_down
        if down is None or run.id not in down.runs:
            return False
        return ev.get("exit_code") != 0 or ev.get("signaled") is True

    def _on_engine_started(self, ev):
        if isinstance(ev.get("host"), str):
            self.state = replace(self.state, host=ev["host"])

    def _on_box_going_down(self, ev):
        self.state = replace(self.state, box_down=BoxDown.from_event(ev))

    def _on_box_checkpointed(self, ev):
        if self.state.box_down is not None:
            self.state = replace(self.state, box_down=replace(
                self.state.box_down, saved=tuple(sorted(ev["saved"].items())),
                unsaved=tuple(str(r) for r in ev["unsaved"])))

    def _on_campaign_moved(self, ev):
        """Every run still live in the ledger ran on the old box: cut where it stood. The
        new box's rental starts now (its window), the one plan change a move makes."""
        move = Move.from_event(ev)
        fetched = ev.get("checkpoints") or {}
        for rid, run in list(self._runs.items()):
            if run.state == RunStatus.RUNNING:
                self._update(rid, state=RunStatus.CUT, ended_t=move.last_t or move.t)
            if self._runs[rid].state == RunStatus.CUT and not run.moved:
                self._update(rid, moved=True, resume_point=fetched.get(rid))
        start = float(ev["t"])
        self.state = replace(self.state, moves=self.state.moves + (move,), box_down=None,
                             window_start=start, window_end=start + move.window_hours * 3600)

    def _on_run_killed(self, ev):
        run = self._runs.get(ev["run"])
        if run and run.stop_requested:
            self._update(ev["run"], stop_requested=replace(run.stop_requested, killed=True))

    def _on_run_terminated(self, ev):
        run = self._runs.get(ev["run"])
        if run and run.stop_requested:
            self._update(ev["run"], stop_requested=replace(run.stop_requested, termed=True))

    def _on_resume_check_result(self, ev):
        self._update(ev["run"], resume_check=ResumeCheck.from_event(ev))

    def _on_checkpoint_acknowledged(self, ev):
        run = self._runs.get(ev["run"])
        if run:
            self._update(ev["run"], checkpoints=run.checkpoints + (CheckpointAck.from_event(ev),))

    def _on_checkpoint_verified(self, ev):
        run = self._runs.get(ev["run"])
        if run:
            verdict = Verification.from_event(ev)
            # a watched file whose name carries no step: the step its training state holds
            # (a Lightning checkpoint's global_step, an HF trainer_state.json), as verified
            acks = tuple(replace(a, step=verdict.step) if a.step is None and a.path == verdict.path
                         and verdict.ok and verdict.step is not None else a
                         for a in run.checkpoints)
            self._update(ev["run"], verified=run.verified + (verdict,), checkpoints=acks)

    def _on_checkpoint_rotated(self, ev):
        run = self._runs.get(ev["run"])
        if run and ev["path"] not in run.rotated:
            step = ev.get("step")
            acks = tuple(replace(a, step=int(step)) if a.step is None and a.path == ev["path"]
                         and isinstance(step, (int, float)) else a for a in run.checkpoints)
            self._update(ev["run"], rotated=run.rotated + (ev["path"],), checkpoints=acks)

    def _on_decision_pending(self, ev):
        pilot = ev.get("pilot")
        deadline = ev.get("deadline")
        self.state = replace(self.state, decision_pending=DecisionPending(
            float(ev["t"]), pilot if isinstance(pilot, dict) else {},
            None if deadline is None else float(deadline), ev.get("default"), ev.get("auto")))

    def _on_decision_taken(self, ev):
        record = Decision(float(ev["t"]), str(ev["decision"]),
                          tuple(str(d) for d in ev.get("drop") or ()), ev.get("by"),
                          opt_text(ev.get("note")), self.state.decision_pending.t
                          if self.state.decision_pending is not None else None)
        self.state = replace(self.state, decisions=self.state.decisions + (record,),
                             decision_pending=None)

    def _on_variant_dropped(self, ev):
        self.state = replace(self.state, dropped=self.state.dropped | {str(ev["variant"])})
        if str(ev.get("reason") or "").startswith("decision by"):
            self._decision_lost(ev, "drop", str(ev["variant"]))

    def _decision_lost(self, ev, decision: str, drop: str | None = None) -> None:
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
        record = Decision(float(ev["t"]), decision, (drop,) if drop else (), INFERRED,
                          "its decision_taken line is missing from the ledger")
        self.state = replace(self.state, decisions=self.state.decisions + (record,),
                             decision_pending=None)

    def _on_queue_paused(self, ev):
        self.state = replace(self.state, paused=True)

    def _on_queue_resumed(self, ev):
        self.state = replace(self.state, paused=False)

    def _on_warning(self, ev):
        warnings = self.state.warnings + (WarningRecord(float(ev["t"]),
                                                        opt_text(ev.get("message")) or ""),)
        self.state = replace(self.state, warnings=warnings[-200:])

    def _on_store_down(self, ev):  # the off-box store went away: a warning on every face
        self._on_warning({"t": ev["t"], "message": f"store {ev['url']} unreachable: "
                          f"{ev['message']} (runs go on; the mirror retries and catches up)"})

    def _on_store_at_risk(self, ev):
        self._on_warning({"t": ev["t"], "message": f"delivery at risk: {ev['message']}"})

    def _on_store_delivered(self, ev):
        if not ev["verified"]:
            failed = "; ".join((ev.get("problems") or [])[:3])
            self._on_warning({"t": ev["t"], "message": f"bundle at {ev['url']} did NOT "
                              f"verify there: {failed}"})

    def _on_wrapup_started(self, ev):
        self.state = replace(self.state, wrapup=WrapupStatus("started", float(ev["t"]),
                                                             float(ev["t"])))

    def _on_wrapup_done(self, ev):
        started = self.state.wrapup.started_t if self.state.wrapup else None
        self.state = replace(self.state, wrapup=WrapupStatus(
            "done" if ev.get("verified") else "failed", float(ev["t"]), started,
            ev.get("bundle"), ev.get("verified") is True, int(ev.get("failures") or 0),
            ev.get("bytes"), tuple(sorted((ev.get("unverified") or {}).items()))))


def replay(events: Iterable[dict]) -> CampaignState:
    builder = StateBuilder()
    for ev in events:
        builder.apply(ev)
    return builder.freeze()
