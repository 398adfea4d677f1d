"""The campaign engine: one loop that launches, watches and stops runs.

One engine, two faces: `itera-tui run --headless` and the control room drive
this same class. Every fact goes to the ledger first; the in-memory state is
the ledger replayed, so a restart (even after kill -9) reattaches to runs
still alive and records those that ended meanwhile. Time is injected (`clock`)
and so are the probes, so tests can drive it precisely.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..campaign.plan import Plan
from . import process
from .actions import ActionsMixin
from .checkpoints import CheckpointMixin
from .errors import EngineError
from .ledger import Ledger, read_ledger
from .live import LiveView, RunLive
from .launching import LaunchMixin
from .rules import RuleSet, Stop
from .scheduler import phase_of
from .state import CampaignState, RunState, StateBuilder
from .watchdog import Watchdog

ENDED = ("finished", "wrapup", "blocked")  # nothing more will launch: time to wrap up


@dataclass(frozen=True)
class EngineSnapshot:
    """Everything a view needs, frozen: safe to hand from a worker to the UI."""

    t: float
    state: CampaignState
    phase: str
    live: dict  # run id -> LiveView
    probe: object | None
    checkpoint_interval_min: float | None
    finished: bool


class Engine(CheckpointMixin, LaunchMixin, ActionsMixin):
    def __init__(self, plan: Plan, clock: Callable[[], float] = time.time, probes=None,
                 poll_interval: float = 0.25, sample_interval: float = 10.0,
                 decide: str | None = None, on_event: Callable[[dict], None] | None = None,
                 idle_after_s: float = 600.0):
        self.plan = plan
        self.clock = clock
        self.probes = probes
        self.poll_interval = poll_interval
        self.sample_interval = sample_interval
        self.auto_decision = decide or ("continue" if plan.pilot and
                                        plan.pilot.decide == "continue" else None)
        self._decision_source = "cli" if decide else "config"
        self.on_event = on_event
        self.state_dir = plan.state_dir
        self.runs_dir = self.state_dir / "runs"
        self._lock = threading.RLock()
        self._builder = StateBuilder()
        self._live: dict[str, RunLive] = {}
        self._verifying: list[tuple[str, str, subprocess.Popen]] = []
        self._lock_file = None
        self._last_sample_t = 0.0
        self.last_probe = None
        self._watchdog = Watchdog(idle_after_s)
        self.ledger: Ledger | None = None

    # -- lifecycle -------------------------------------------------------
    def open(self) -> "Engine":
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        self.ledger = Ledger(self.state_dir / "ledger.jsonl", self.clock)
        for ev in read_ledger(self.ledger.path):
            self._builder.apply(ev)
        now = self.clock()
        if self.state.started_t is None:
            self._freeze_plan()
        elif self.state.plan_sha256 != self._plan_sha256():
            self._record("warning", message="campaign.toml changed since the campaign "
                         "started; the frozen plan in .itera/plan.toml is kept as planned")
        if self.state.window_start is None:
            start = (self.plan.window.start.timestamp() if self.plan.window.start
                     else now)
            self._record("window_started", start=start,
                         end=start + self.plan.window_hours * 3600,
                         hours=self.plan.window_hours)
        self._record("engine_started", pid=os.getpid())
        self._reattach(now)
        return self

    def close(self) -> None:
        """Leave the runs alone: they live in their own sessions."""
        with self._lock:
            if self.ledger is not None:
                self._record("engine_stopped", pid=os.getpid())
            if self._lock_file is not None:
                self._lock_file.close()
                self._lock_file = None

    def _take_lock(self) -> None:
        path = self.state_dir / "engine.lock"
        f = open(path, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read().strip() or "?"
            f.close()
            raise EngineError(f"another itera-tui (pid {holder}) is driving this campaign; "
                              "use `itera-tui status` to watch it") from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        self._lock_file = f

    def _plan_sha256(self) -> str:
        return hashlib.sha256(self.plan.path.read_bytes()).hexdigest()

    def _freeze_plan(self) -> None:
        import tomli_w

        frozen = self.state_dir / "plan.toml"
        if not frozen.exists():
            tmp = frozen.with_suffix(".tmp")
            tmp.write_bytes(tomli_w.dumps(self.plan.raw).encode())
            os.replace(tmp, frozen)
        from .. import __version__

        self._record("campaign_started", plan_sha256=self._plan_sha256(),
                     frozen_plan=".itera/plan.toml", tool_version=__version__)

    @property
    def state(self) -> CampaignState:
        return self._builder.freeze()

    def _record(self, event: str, **fields) -> dict:
        ev = self.ledger.append(event, **fields)
        self._builder.apply(ev)
        if self.on_event is not None:
            self.on_event(ev)
        return ev

    def _reattach(self, now: float) -> None:
        for run in self.state.running:
            run_dir = self.runs_dir / run.id
            live = self._make_live(run)
            exit_info = process.read_exit(run_dir)
            # records written while nobody watched still face the rules
            backlog_stop = live.poll(now, evaluate=run.stop is None)
            self._ack_events(run.id, live)
            if backlog_stop is not None:
                self._record_stop(run.id, backlog_stop)
            if exit_info is not None:
                self._record("run_exited", run=run.id, exit_code=exit_info.get("exit_code"),
                             note="ended while the control room was down")
            elif process.same_process(run.pid, run.pid_start):
                self._record("run_reattached", run=run.id, pid=run.pid)
                run = self.state.run(run.id)
                if backlog_stop is not None or run.stop_requested:
                    # the SIGTERM may never have left a crashed control room: send it now
                    self._request_stop(run, by="rule", reason=(run.stop or {}).get("reason")
                                       or "stop requested before the restart", now=now)
            else:
                self._record("run_exited", run=run.id, exit_code=None,
                             note="process vanished while the control room was down "
                                  "(no exit status)")
        for run in self.state.runs:  # finished runs: history for the views
            if run.id not in self._live:
                self._make_live(run).poll(now, evaluate=False)
        for run in self.state.runs:  # verifications a previous engine left in flight
            done = {v.get("path") for v in run.verified}
            for ack in run.checkpoints:
                if ack.get("path") and ack["path"] not in done:
                    self._start_verification(run.id, ack["path"])

    def _make_live(self, run: RunState) -> RunLive:
        variant = run.target
        rules = RuleSet(self.plan.stops, variant, run.kind)
        live = RunLive(run.id, self.runs_dir / run.id, rules, self.plan.metrics,
                       self.plan.campaign.metric, self.plan.campaign.direction,
                       run.launched_t or self.clock())
        live.control_seq = _count_lines(self.runs_dir / run.id / "control.jsonl")
        acks = [c["t"] for c in run.checkpoints]
        live.last_checkpoint_request_t = max([live.started_t] + acks)
        self._live[run.id] = live
        return live

    # -- the loop --------------------------------------------------------
    def tick(self) -> None:
        with self._lock:
            now = self.clock()
            for run in self.state.running:
                self._watch(run, now)
            self._poll_verifications()
            self._maybe_sample(now)
            self._maybe_decide()
            self._launch_ready(now)

    def _watch(self, run: RunState, now: float) -> None:
        live = self._live.get(run.id) or self._make_live(run)
        stop = live.poll(now, evaluate=run.stop is None)
        self._ack_events(run.id, live)
        if stop is not None:
            self._fire(run, stop, now)
            run = self.state.run(run.id)
        if run.stop is None:
            tick_stop = live.rules.on_tick(now, live.started_t, live.last_record_t,
                                           run.last_verified_checkpoint is not None, run.kind)
            if tick_stop is not None:
                self._fire(run, tick_stop, now)
                run = self.state.run(run.id)
        self._pilot_time_box(run, now)
        self._maybe_periodic_checkpoint(run, live, now)
        if self._exited(run, live):
            last = live.poll(now, evaluate=self.state.run(run.id).stop is None)
            self._ack_events(run.id, live)
            if last is not None:  # the run wrote its last records and left
                self._record_stop(run.id, last)
            code = self._exit_code(run, live)
            self._record("run_exited", run=run.id, exit_code=code,
                         duration_s=round(now - (run.launched_t or now), 3))
            return
        requested = run.stop_requested
        if requested and requested.get("deadline") and now >= requested["deadline"] \
                and not requested.get("killed"):
            process.kill(run.pid)
            self._record("run_killed", run=run.id, signal="SIGKILL",
                         after_s=round(now - requested["t"], 3))

    def _exited(self, run: RunState, live: RunLive) -> bool:
        if live.popen is not None:
            return live.popen.poll() is not None
        return not process.same_process(run.pid, run.pid_start)

    def _exit_code(self, run: RunState, live: RunLive) -> int | None:
        info = process.read_exit(self.runs_dir / run.id)
        if info is not None:
            return info.get("exit_code")
        if live.popen is not None and live.popen.returncode is not None:
            return live.popen.returncode
        return None

    def _record_stop(self, rid: str, stop: Stop) -> None:
        fields = stop.to_dict()
        self._record("stop_rule_fired", run=rid, rule=fields["rule"], reason=fields["reason"],
                     value=fields["value"], step=fields["step"], record_t=fields["t"])

    def _fire(self, run: RunState, stop: Stop, now: float) -> None:
        self._record_stop(run.id, stop)
        self._request_stop(run, by="rule", reason=f"{stop.rule}: {stop.reason}", now=now)

    def _request_stop(self, run: RunState, by: str, reason: str, now: float) -> None:
        previous = run.stop_requested
        if previous and previous.get("deadline"):
            # asked again (a second key press, a restart): SIGTERM again, same deadline
            process.terminate(run.pid)
            return
        deadline = now + self.plan.grace_seconds
        self._record("run_stop_requested", run=run.id, by=by, reason=reason,
                     signal="SIGTERM", deadline=deadline)
        self._write_control(run.id, "stop")
        process.terminate(run.pid)

    def _pilot_time_box(self, run: RunState, now: float) -> None:
        pilot = self.plan.pilot
        if (run.kind == "pilot" and pilot and pilot.hours and not run.stop_requested
                and now - (run.launched_t or now) > pilot.hours * 3600):
            self._request_stop(run, by="pilot", reason="pilot time box reached", now=now)

    def _maybe_sample(self, now: float) -> None:
        if self.probes is None or now - self._last_sample_t < self.sample_interval:
            return
        self._last_sample_t = now
        sample = self.probes.sample(now)
        self.last_probe = sample
        line = json.dumps(sample.to_dict()) + "\n"
        running = self.state.running
        for run in running:
            with open(self.runs_dir / run.id / "samples.jsonl", "a") as f:
                f.write(line)
        self.observe_probe(sample)

    def observe_probe(self, sample) -> list[str]:
        """Feed a probe sample to the watchdog; its warnings go to the ledger."""
        with self._lock:
            messages = self._watchdog.check(self.clock(), sample, self.state.running)
            for message in messages:
                self._record("warning", message=message)
            return messages

    # -- decisions and launches -------------------------------------------
    def _maybe_decide(self) -> None:
        state = self.state
        if phase_of(self.plan, state) != "decision":
            return
        if state.decision_pending is None:
            self._record("decision_pending", pilot=self._pilot_figures())
        if self.auto_decision:
            decision, self.auto_decision = self.auto_decision, None
            self.decide(decision, by=self._decision_source)

    def _pilot_figures(self) -> dict:
        out = {}
        for run in self.state.runs:
            if run.kind == "pilot":
                view = self._live[run.id].view() if run.id in self._live else None
                out[run.target] = {"run": run.id, "state": run.state, "stop": run.stop,
                                   "metric": view.best_metric if view else None,
                                   "last_loss": view.last_loss if view else None,
                                   "step": view.last_step if view else None}
        return out

    # -- views -------------------------------------------------------------
    @property
    def finished(self) -> bool:
        state = self.state
        return not state.running and phase_of(self.plan, state) in ENDED

    def snapshot(self) -> EngineSnapshot:
        with self._lock:
            state = self.state
            live = {rid: lv.view() for rid, lv in self._live.items()}
            return EngineSnapshot(t=self.clock(), state=state,
                                  phase=phase_of(self.plan, state), live=live,
                                  probe=self.last_probe,
                                  checkpoint_interval_min=self.checkpoint_interval_min(),
                                  finished=not state.running and phase_of(
                                      self.plan, state) in ENDED)

    def live_view(self, rid: str) -> LiveView | None:
        with self._lock:
            live = self._live.get(rid)
            return live.view() if live else None


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0
