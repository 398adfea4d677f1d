"""Watching live runs: their metrics against the stop rules, their exit, the kill.

Each live run has a `RunLive` (its feeds, rules and bounded history). Every
tick the watcher reads what is new, lets a firing rule stop the run (SIGTERM
to its process group, SIGKILL after the grace), notices the exit and records
it with the status the launcher left in `exit.json`. After a restart it
reattaches by pid and start time; records written while nobody watched still
face the rules.
"""

from __future__ import annotations

from pathlib import Path

from ..campaign.plan import Plan
from . import process
from .checkpoints import Checkpoints
from .control import ControlFiles
from .journal import Journal
from .live import LiveView, RunLive
from .rules import RuleSet, Stop
from .state import RunState
from .verification import VerificationQueue
from .watched import CheckpointWatcher


class RunWatcher:
    def __init__(self, plan: Plan, journal: Journal, runs_dir: Path, control: ControlFiles,
                 checkpoints: Checkpoints, verifier: VerificationQueue):
        self.plan = plan
        self.journal = journal
        self.runs_dir = runs_dir
        self.control = control
        self.checkpoints = checkpoints
        self.verifier = verifier
        self._live: dict[str, RunLive] = {}
        self._popen: dict[str, object] = {}
        self._bound_reached_t: dict[str, float] = {}
        self._watched: dict[str, CheckpointWatcher] = {}  # `[checkpoint] watch` globs

    # -- live views -------------------------------------------------------------
    def adopt(self, run: RunState, popen=None, started_t: float | None = None) -> RunLive:
        rules = RuleSet(self.plan.stops, run.target, run.kind)
        started = started_t or run.launched_t or self.journal.clock()
        pilot = self.plan.pilot
        live = RunLive(run.id, self.runs_dir / run.id, rules, self.plan.metrics,
                       self.plan.campaign.metric, self.plan.campaign.direction, started,
                       bound=pilot.steps if pilot and run.kind == "pilot" else None)
        self._live[run.id] = live
        if self.plan.checkpoint.watch and run.state == "running":
            self._watched[run.id] = CheckpointWatcher(
                self.runs_dir / run.id, self.plan.checkpoint.watch,
                known=[c.to_dict() for c in run.checkpoints])
        if popen is not None:
            self._popen[run.id] = popen
        self.checkpoints.adopt(run, started)
        return live

    def views(self) -> dict[str, LiveView]:
        return {rid: live.view() for rid, live in self._live.items()}

    def view(self, rid: str) -> LiveView | None:
        live = self._live.get(rid)
        return live.view() if live else None

    # -- after a restart ----------------------------------------------------------
    def reattach(self, now: float) -> None:
        for run in self.journal.state.running:
            run_dir = self.runs_dir / run.id
            live = self.adopt(run)
            exit_info = process.read_exit(run_dir)
            backlog_stop = live.poll(now, evaluate=run.rules_apply)
            self._acknowledge(run.id, live, now, exited=exit_info is not None)
            if backlog_stop is not None:
                self.record_stop(run.id, backlog_stop)
            if exit_info is not None:
                self.journal.record("run_exited", run=run.id,
                                    exit_code=exit_info.get("exit_code"),
                                    note="ended while the control room was down")
            elif process.same_process(run.pid, run.pid_start):
                self.journal.record("run_reattached", run=run.id, pid=run.pid)
                run = self.journal.state.run(run.id)
                if backlog_stop is not None or run.stop_requested:
                    # the SIGTERM may never have left a crashed control room: send it now
                    reason = (run.stop.reason if run.stop else None) \
                        or "stop requested before the restart"
                    self.request_stop(run, by="rule", reason=reason, now=now)
            else:
                self.journal.record("run_exited", run=run.id, exit_code=None,
                                    note="process vanished while the control room was down "
                                         "(no exit status)")
        for run in self.journal.state.runs:  # finished runs: history for the views
            if run.id not in self._live:
                self.adopt(run).poll(now, evaluate=False)

    # -- every tick -----------------------------------------------------------------
    def watch(self, run: RunState, now: float) -> None:
        live = self._live.get(run.id) or self.adopt(run)
        stop = live.poll(now, evaluate=run.rules_apply)
        self._acknowledge(run.id, live, now)
        if stop is not None:
            self.fire(run, stop, now)
            run = self.journal.state.run(run.id)
        if run.stop is None:
            has_checkpoint = (run.last_verified_checkpoint is not None
                              or self.verifier.pending_for(run.id))  # pending never counts against
            tick_stop = live.rules.on_tick(now, live.started_t, live.last_record_t,
                                           has_checkpoint, run.kind)
            if tick_stop is not None:
                self.fire(run, tick_stop, now)
                run = self.journal.state.run(run.id)
        self._pilot_bounds(run, live, now)
        self.checkpoints.maybe_periodic(run, now)
        if self._exited(run):
            last = live.poll(now, evaluate=self.journal.state.run(run.id).rules_apply)
            self._acknowledge(run.id, live, now, exited=True)
            if last is not None:  # the run wrote its last records and left
                self.record_stop(run.id, last)
            self.journal.record("run_exited", run=run.id, exit_code=self._exit_code(run),
                                duration_s=round(now - (run.launched_t or now), 3))
            self._popen.pop(run.id, None)
            return
        requested = run.stop_requested
        if requested and not requested.termed and now >= (requested.term_at or now):
            process.terminate(run.pid)  # the graceful stop request was not enough
            self.journal.record("run_terminated", run=run.id, signal="SIGTERM")
        if requested and requested.deadline and now >= requested.deadline \
                and not requested.killed:
            process.kill(run.pid)
            self.journal.record("run_killed", run=run.id, signal="SIGKILL",
                                after_s=round(now - requested.t, 3))

    def _acknowledge(self, rid: str, live: RunLive, now: float, exited: bool = False) -> None:
        """The run's own events, plus checkpoints its code wrote by itself (watched)."""
        events = live.take_events()
        watcher = self._watched.get(rid)
        if watcher is not None:
            events += watcher.drain(now) if exited else watcher.poll(now)
            for problem in watcher.take_problems():
                self.journal.record("warning", run=rid, message=f"{rid}: {problem}")
            if exited:
                self._watched.pop(rid, None)
        self.checkpoints.acknowledge(rid, events)

    def _pilot_bounds(self, run: RunState, live: RunLive, now: float) -> None:
        """The engine bounds a pilot itself: scripts may ignore ITERA_MAX_STEPS."""
        pilot = self.plan.pilot
        if run.kind != "pilot" or not pilot or run.stop_requested:
            return
        step = live.global_step  # monotonic, even when the printed step restarts each epoch
        if pilot.steps and step is not None and step >= pilot.steps:
            # a script that honours ITERA_MAX_STEPS ends by itself at its bound: give it
            # the grace to do so; one that runs past the bound is asked to stop at once
            reached = self._bound_reached_t.setdefault(run.id, now)
            if step > pilot.steps or now - reached >= self.plan.grace_seconds:
                self.request_stop(run, by="pilot_bound", reason=f"pilot bound reached "
                                  f"(step {step} of {pilot.steps})", now=now, graceful=True)
        elif pilot.hours and now - (run.launched_t or now) > pilot.hours * 3600:
            self.request_stop(run, by="pilot", reason="pilot time box reached", now=now)

    def _exited(self, run: RunState) -> bool:
        popen = self._popen.get(run.id)
        if popen is not None:
            return popen.poll() is not None
        return not process.same_process(run.pid, run.pid_start)

    def _exit_code(self, run: RunState) -> int | None:
        info = process.read_exit(self.runs_dir / run.id)
        if info is not None:
            return info.get("exit_code")
        popen = self._popen.get(run.id)
        if popen is not None and popen.returncode is not None:
            return popen.returncode
        return None

    # -- stopping ----------------------------------------------------------------------
    def record_stop(self, rid: str, stop: Stop) -> None:
        fields = stop.to_dict()
        self.journal.record("stop_rule_fired", run=rid, rule=fields["rule"],
                            reason=fields["reason"], value=fields["value"],
                            step=fields["step"], record_t=fields["t"])

    def fire(self, run: RunState, stop: Stop, now: float) -> None:
        self.record_stop(run.id, stop)
        self.request_stop(run, by="rule", reason=f"{stop.rule}: {stop.reason}", now=now)

    def request_stop(self, run: RunState, by: str, reason: str, now: float,
                     graceful: bool = False) -> None:
        """SIGTERM to the run's group now, SIGKILL after the grace. `graceful`: the
        protocol's stop request first, and SIGTERM only once the grace is over (a
        pilot that honours ITERA_MAX_STEPS ends by itself, its tail intact)."""
        previous = run.stop_requested
        if previous and previous.deadline:
            if previous.termed:  # asked again (a key, a restart): SIGTERM again
                process.terminate(run.pid)
            return
        grace = self.plan.grace_seconds
        if graceful:
            self.journal.record("run_stop_requested", run=run.id, by=by, reason=reason,
                                signal="none", term_at=now + grace,
                                deadline=now + 2 * grace)
            self.control.write(run.id, "stop")
            return
        self.journal.record("run_stop_requested", run=run.id, by=by, reason=reason,
                            signal="SIGTERM", deadline=now + grace)
        self.control.write(run.id, "stop")
        process.terminate(run.pid)
