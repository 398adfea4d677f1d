"""State = replay(ledger): the campaign as the ledger tells it.

Nothing about a campaign is stored outside the ledger; this module folds its
events into frozen snapshots. The engine applies each new event to the same
builder, so the live state and a replay after a crash are the same function
of the same events.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable

RUN_STATES = ("queued", "running", "completed", "stopped", "dropped", "failed")


@dataclass(frozen=True)
class RunState:
    id: str
    target: str  # variant or step id
    kind: str  # step | pilot | run | post
    category: str
    attempt: int
    config_hash: str
    state: str
    launched_t: float | None = None
    ended_t: float | None = None
    pid: int | None = None
    pid_start: float | None = None
    lanes: tuple[str, ...] = ()
    devices: str = ""
    lot: str | None = None
    max_steps: int | None = None
    exit_code: int | None = None
    stop: dict | None = None  # {rule, reason, value, step, t}
    stop_requested: dict | None = None  # {by, reason, t, deadline}
    checkpoints: tuple[dict, ...] = ()  # acknowledged, in order
    verified: tuple[dict, ...] = ()  # verification results
    resume_check: dict | None = None  # {ok, steps_compared, max_abs_diff, problem}
    config: dict = field(default_factory=dict, compare=False)

    @property
    def alive(self) -> bool:
        return self.state == "running"

    @property
    def last_verified_checkpoint(self) -> dict | None:
        ok = [v for v in self.verified if v.get("ok")]
        return ok[-1] if ok else None

    def to_dict(self) -> dict:
        return {"id": self.id, "variant": self.target, "kind": self.kind,
                "category": self.category, "attempt": self.attempt,
                "config_hash": self.config_hash, "state": self.state, "stop": self.stop,
                "exit_code": self.exit_code, "launched_t": self.launched_t,
                "ended_t": self.ended_t, "pid": self.pid, "lanes": list(self.lanes),
                "devices": self.devices, "max_steps": self.max_steps,
                "checkpoints": len(self.checkpoints),
                "last_verified_checkpoint": self.last_verified_checkpoint}


@dataclass(frozen=True)
class CampaignState:
    runs: tuple[RunState, ...] = ()
    started_t: float | None = None
    window_start: float | None = None
    window_end: float | None = None
    plan_sha256: str | None = None
    decisions: tuple[dict, ...] = ()
    decision_pending: dict | None = None
    dropped: frozenset = frozenset()
    paused: bool = False
    wrapup: dict | None = None  # {state: started|done|failed, bundle, verified}
    warnings: tuple[dict, ...] = ()
    events: int = 0

    def run(self, run_id: str) -> RunState:
        for r in self.runs:
            if r.id == run_id:
                return r
        raise KeyError(run_id)

    def runs_of(self, target: str, kind: str | None = None) -> list[RunState]:
        return [r for r in self.runs if r.target == target and (kind is None or r.kind == kind)]

    @property
    def running(self) -> list[RunState]:
        return [r for r in self.runs if r.state == "running"]

    @property
    def decided(self) -> dict | None:
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
            handler(ev)
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
        self.state = replace(self.state, started_t=ev["t"], plan_sha256=ev.get("plan_sha256"))

    def _on_window_started(self, ev):
        self.state = replace(self.state, window_start=ev["start"], window_end=ev["end"])

    def _on_run_launched(self, ev):
        self._runs[ev["run"]] = RunState(
            id=ev["run"], target=ev["target"], kind=ev["kind"], category=ev["category"],
            attempt=ev["attempt"], config_hash=ev["config_hash"], state="running",
            launched_t=ev["t"], pid=ev.get("pid"), pid_start=ev.get("pid_start"),
            lanes=tuple(ev.get("lanes", ())), devices=ev.get("devices", ""),
            lot=ev.get("lot"), max_steps=ev.get("max_steps"), config=ev.get("config", {}))

    def _on_run_skipped(self, ev):
        rid = f"{ev['target']}-{ev['kind']}-skipped"
        self._runs[rid] = RunState(
            id=rid, target=ev["target"], kind=ev["kind"], category=ev.get("category", ""),
            attempt=0, config_hash="", state="failed", launched_t=None, ended_t=ev["t"],
            stop={"rule": "window", "reason": ev.get("reason"), "value": None, "step": None,
                  "t": ev["t"]})

    def _on_stop_rule_fired(self, ev):
        run = self._runs.get(ev["run"])
        if run and run.stop is None:
            self._update(ev["run"], stop={k: ev.get(k) for k in
                                          ("rule", "reason", "value", "step")} | {"t": ev["t"]})

    def _on_run_stop_requested(self, ev):
        run = self._runs.get(ev["run"])
        if run is None:
            return
        changes = {"stop_requested": {"by": ev.get("by"), "reason": ev.get("reason"),
                                      "t": ev["t"], "deadline": ev.get("deadline")}}
        if run.stop is None and ev.get("by") in ("user", "wrapup", "pilot"):
            changes["stop"] = {"rule": ev.get("by"), "reason": ev.get("reason"),
                               "value": None, "step": ev.get("step"), "t": ev["t"]}
        self._update(ev["run"], **changes)

    def _on_run_exited(self, ev):
        run = self._runs.get(ev["run"])
        if run is None:
            return
        code = ev.get("exit_code")
        if run.stop is not None and run.stop.get("rule") == "pilot":
            state = "completed"  # a time-boxed pilot ends by design
        elif run.stop is not None:
            state = "stopped"
        else:
            state = "completed" if code == 0 else "failed"
        self._update(ev["run"], state=state, exit_code=code, ended_t=ev["t"])

    def _on_run_killed(self, ev):
        run = self._runs.get(ev["run"])
        if run and run.stop_requested:
            self._update(ev["run"], stop_requested=run.stop_requested | {"killed": True})

    def _on_resume_check_result(self, ev):
        self._update(ev["run"], resume_check={k: ev.get(k) for k in
                                              ("ok", "steps_compared", "max_abs_diff",
                                               "problem")})

    def _on_checkpoint_acknowledged(self, ev):
        run = self._runs.get(ev["run"])
        if run:
            ack = {k: ev.get(k) for k in ("path", "sha256", "bytes", "write_s", "block_s",
                                          "step", "mode")} | {"t": ev["t"]}
            self._update(ev["run"], checkpoints=run.checkpoints + (ack,))

    def _on_checkpoint_verified(self, ev):
        run = self._runs.get(ev["run"])
        if run:
            result = {k: ev.get(k) for k in ("path", "ok", "problem", "step")} | {"t": ev["t"]}
            self._update(ev["run"], verified=run.verified + (result,))

    def _on_decision_pending(self, ev):
        self.state = replace(self.state, decision_pending={"t": ev["t"],
                                                           "pilot": ev.get("pilot", {})})

    def _on_decision_taken(self, ev):
        record = {"t": ev["t"], "decision": ev["decision"], "drop": ev.get("drop", []),
                  "by": ev.get("by"), "note": ev.get("note")}
        self.state = replace(self.state, decisions=self.state.decisions + (record,),
                             decision_pending=None)

    def _on_variant_dropped(self, ev):
        self.state = replace(self.state, dropped=self.state.dropped | {ev["variant"]})

    def _on_queue_paused(self, ev):
        self.state = replace(self.state, paused=True)

    def _on_queue_resumed(self, ev):
        self.state = replace(self.state, paused=False)

    def _on_warning(self, ev):
        warnings = (self.state.warnings + ({"t": ev["t"], "message": ev.get("message")},))
        self.state = replace(self.state, warnings=warnings[-200:])

    def _on_wrapup_started(self, ev):
        self.state = replace(self.state, wrapup={"state": "started", "t": ev["t"],
                                                 "started_t": ev["t"]})

    def _on_wrapup_done(self, ev):
        started = (self.state.wrapup or {}).get("started_t")
        self.state = replace(self.state, wrapup={"state": "done" if ev.get("verified")
                                                 else "failed", "t": ev["t"],
                                                 "started_t": started, "bytes": ev.get("bytes"),
                                                 "bundle": ev.get("bundle"),
                                                 "verified": ev.get("verified"),
                                                 "failures": ev.get("failures", 0)})


def replay(events: Iterable[dict]) -> CampaignState:
    builder = StateBuilder()
    for ev in events:
        builder.apply(ev)
    return builder.freeze()
