"""Watching live runs: their metrics against the stop rules, their exit, the kill.

Each live run has a `RunLive` (its feeds, rules and bounded history). Every
tick the watcher reads what is new, lets a firing rule stop the run (SIGTERM
to its process group, SIGKILL after the grace), notices the exit and records
it with the status the launcher left in `exit.json`. After a restart it
reattaches by pid and start time; records written while nobody watched still
face the rules. Every "how long since" here is monotonic time (`clock`); what
a run leaves behind when it exits is ended too (`leftovers`), and a source it
swaps for a FIFO or floods is said once in the ledger (`regular_files`,
`segments`).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ...campaign.loading.sections import rule_label
from ...campaign.plan import Plan
from ..clock import MonotonicAnchors
from ..conclusion.outcome import watched_metrics
from ..checkpoints.requests import Checkpoints
from ..runs.control import ControlFiles
from ..ledger.journal import Journal
from ..runs.belonging import RunIdentity
from ..runs.leftovers import Leftover
from ..runs.port import HostProcesses, Processes, RunTree
from .live import LiveView, RunLive
from ..retry import retry_fields
from ..rules import RuleSet, Stop
from .watchdog import run_utils
from ..ledger.state import RunState
from ..checkpoints.queue import VerificationQueue
from ..checkpoints.watched import CheckpointWatcher
from ..checkpoints.answerable import checkpoint_refusal
from ..conclusion.outcome import figure_bound
from ..ledger.events import RunExited, RunKilled, RunLeftovers, RunLeftoversKilled, RunProgress, RunReattached, RunStopRequested, RunTerminated, StopRuleFired, WarningEvent


PROGRESS_EVERY_S = 300.0  # a run's step into the ledger at most this often (run_progress):
# a ledger line per run per 5 min (a month of 8 runs: 69k lines), not per 30 s (415k)


def _signaled(exit_info: dict | None) -> dict:
    """`signaled=True` when the run's launcher saw a SIGTERM (exit.json): a run the system
    stopped while its box went down is cut there, not failed, not done."""
    seen = (exit_info or {}).get("signals_seen")
    if isinstance(seen, list) and 15 in seen:
        return {"signaled": True}
    return {}


class RunWatcher:
    def __init__(self, plan: Plan, journal: Journal, runs_dir: Path, control: ControlFiles,
                 checkpoints: Checkpoints, verifier: VerificationQueue,
                 monotonic: Callable[[], float] = time.monotonic,
                 processes: Processes | None = None):
        self.plan = plan
        self.processes = processes or HostProcesses()  # every signal and look goes here
        self.monotonic = monotonic  # every "how long since" below (see tui.engine.clock)
        self.anchors = MonotonicAnchors(journal.clock, monotonic)
        self.journal = journal
        self.runs_dir = runs_dir
        self.control = control
        self.checkpoints = checkpoints
        self.verifier = verifier
        self._live: dict[str, RunLive] = {}
        self._popen: dict[str, object] = {}
        self._bound_reached_t: dict[str, float] = {}
        self._watched: dict[str, CheckpointWatcher] = {}  # `[checkpoint] watch` globs
        self._said: dict[str, set[str]] = {}  # feed problems already in the ledger, per run
        self._skipped_said: dict[str, int] = {}  # skipped bytes last said, per run
        self._procs: dict[str, RunTree] = {}  # each live run's processes (leftovers)
        self._leftovers: dict[str, tuple[float, list[Leftover]]] = {}  # SIGTERMed at (mono)
        self._progress_said: dict[str, float] = {}  # when each run's step was last recorded

    # -- live views -------------------------------------------------------------
    def adopt(self, run: RunState, popen=None, started_t: float | None = None) -> RunLive:
        rules = RuleSet(self.plan.stops, run.target, run.kind)
        started = started_t or run.launched_t or self.journal.clock()
        pilot = self.plan.pilot
        bound = figure_bound(run)  # a pilot's figures end at its bound, or its rule's stop
        if bound is None and pilot and run.kind == "pilot":
            bound = pilot.steps
        live = RunLive(run.id, self.runs_dir / run.id, rules, self.plan.metrics,
                       self.plan.campaign.metric, self.plan.campaign.direction, started,
                       started_mono=self.anchors.anchor(("started", run.id), started),
                       bound=bound, watched=watched_metrics(self.plan, run.target))
        self._live[run.id] = live
        if self.plan.checkpoint.watch and run.state == "running":
            self._watched[run.id] = CheckpointWatcher(
                self.runs_dir / run.id, self.plan.checkpoint.watch,
                known=[c.to_dict() for c in run.checkpoints])
        if popen is not None:
            self._popen[run.id] = popen
        if run.state == "running":
            self._procs[run.id] = self.processes.tree(self.identity(run.id), run.pid, run.pid_start)
        self.checkpoints.adopt(run, started)
        return live

    def identity(self, rid: str) -> RunIdentity:
        """The marks a process needs before the engine signals it as this run's."""
        return RunIdentity.of(rid, self.runs_dir / rid, self.plan.root)

    def views(self) -> dict[str, LiveView]:
        return {rid: live.view() for rid, live in self._live.items()}

    def view(self, rid: str) -> LiveView | None:
        live = self._live.get(rid)
        return live.view() if live else None

    def checkpoint_refusal(self, run: RunState) -> str | None:
        """Why the run cannot answer a checkpoint request (checkpoints/answerable.py),
        from the records the engine has read of it; None when it can."""
        live = self._live.get(run.id)
        counts = (live.feeds.records, live.jsonl.records) if live is not None else (None, None)
        return checkpoint_refusal(self.plan, run, *counts)

    def can_checkpoint(self, run: RunState) -> bool:
        return self.checkpoint_refusal(run) is None

    # -- after a restart ----------------------------------------------------------
    def reattach(self, now: float) -> None:
        for run in self.journal.state.running:
            run_dir = self.runs_dir / run.id
            live = self.adopt(run)
            exit_info = self.processes.read_exit(run_dir)
            backlog_stop = live.poll(now, evaluate=run.rules_apply, mono=self.monotonic())
            self._acknowledge(run.id, live, now, exited=exit_info is not None)
            if backlog_stop is not None:
                self.record_stop(run.id, backlog_stop)
            if exit_info is not None:
                code = exit_info.get("exit_code")
                self.journal.record(RunExited(run=run.id, exit_code=code,
                                    note="ended while the control room was down",
                                    **live.readout_fields(), **_signaled(exit_info),
                                    **self._retry(run.id, code, now)))
                self._end_leftovers(run.id)
            elif self.processes.same_process(run.pid, run.pid_start) and \
                    self.processes.is_launcher(run.pid, run.pid_start, self.identity(run.id)):
                # the very launcher, and this campaign's (a damaged line could name
                # another's): only then is it watched, and signalled, as this run
                self.journal.record(RunReattached(run=run.id, pid=run.pid))
                run = self.journal.state.run(run.id)
                if backlog_stop is not None or run.stop_requested:
                    # the SIGTERM may never have left a crashed control room: send it now
                    reason = (run.stop.reason if run.stop else None) \
                        or "stop requested before the restart"
                    self.request_stop(run, by="rule", reason=reason, now=now)
            else:
                self.journal.record(RunExited(run=run.id, exit_code=None,
                                    note="process vanished while the control room was down "
                                         "(no exit status)", **live.readout_fields()))
                self._end_leftovers(run.id)
        for run in self.journal.state.runs:  # finished runs: history for the views
            if run.id not in self._live:
                self.adopt(run).poll(now, evaluate=False, mono=self.monotonic())

    # -- every tick -----------------------------------------------------------------
    def watch(self, run: RunState, now: float) -> None:
        live = self._live.get(run.id) or self.adopt(run)
        mono = self.monotonic()
        stop = live.poll(now, evaluate=run.rules_apply, mono=mono)
        self._progress(run, live, mono)
        self._acknowledge(run.id, live, now)
        self._say_feed_trouble(run.id, live)
        if stop is not None:
            self.fire(run, stop, now)
            run = self.journal.state.run(run.id)
        if run.stop is None:
            has_checkpoint = (run.last_verified_checkpoint is not None
                              or self.verifier.pending_for(run.id))  # pending never counts against
            # liveness on the monotonic clock; the `resume` clock starts at the first record
            tick_stop = live.rules.on_tick(mono, live.started_mono, live.last_record_mono,
                                           has_checkpoint, run.kind,
                                           first_record=live.first_record_mono)
            if tick_stop is not None:
                tick_stop = replace(tick_stop, t=now)  # the wall time, for a person
                self.fire(run, tick_stop, now)
                run = self.journal.state.run(run.id)
        self._pilot_bounds(run, live, now, mono)
        procs = self._procs.get(run.id)
        if procs is not None:
            procs.track(mono)
        self.checkpoints.maybe_periodic(run, now)
        if self._exited(run):
            live.feeds.look_again()  # an event file made since the last look is read too
            last = live.poll(now, evaluate=self.journal.state.run(run.id).rules_apply,
                             mono=mono)
            self._acknowledge(run.id, live, now, exited=True)
            self._progress(self.journal.state.run(run.id), live, mono, final=True)
            if last is not None:  # the run wrote its last records and left
                self.record_stop(run.id, last)
            stopped = self.journal.state.run(run.id).stop_requested
            code = self._exit_code(run)
            self.journal.record(RunExited(run=run.id, exit_code=code,
                                duration_s=round(mono - live.started_mono, 3),
                                **live.readout_fields(),
                                **({"stopped_by": str(stopped.by)} if stopped else {}),
                                **_signaled(self.processes.read_exit(self.runs_dir / run.id)),
                                **self._retry(run.id, code, now)))
            self._popen.pop(run.id, None)
            self._end_leftovers(run.id)
            return
        requested = run.stop_requested
        if not requested:
            return
        # the grace on the monotonic clock: a clock step neither kills early nor never
        waited = self.anchors.elapsed(("stop", run.id, requested.t), requested.t)
        if not requested.termed and waited >= (requested.term_at or requested.t) - requested.t:
            # the graceful stop request was not enough
            self.processes.terminate(run.pid, run.pid_start, self.identity(run.id))
            self.journal.record(RunTerminated(run=run.id, signal="SIGTERM"))
        if requested.deadline and waited >= requested.deadline - requested.t \
                and not requested.killed:
            self.processes.kill(run.pid, run.pid_start, self.identity(run.id))
            self.journal.record(RunKilled(run=run.id, signal="SIGKILL",
                                after_s=round(waited, 3)))

    def _retry(self, rid: str, exit_code: int | None, now: float) -> dict:
        """`[retry]`'s answer for a run ending now, on its `run_exited` (tui.engine.retry)."""
        return retry_fields(self.plan, self.journal.state, self.journal.state.run(rid),
                            exit_code, self.runs_dir / rid, now)

    def _progress(self, run: RunState, live: RunLive, mono: float, final: bool = False) -> None:
        """How far its records went, into the ledger: at its first record (with the step
        it began at), then at most every PROGRESS_EVERY_S while the step moves, and once
        more as it exits. A box that dies without a word leaves these in the store's
        ledger: the next box counts the work redone from them (`tui.engine.lost_work`)."""
        step = live.global_step
        if step.__class__ is not int or (run.reached_step is not None
                                          and step <= run.reached_step):
            return
        said = self._progress_said.get(run.id)
        if run.reached_step is not None and not final and said is not None \
                and mono - said < PROGRESS_EVERY_S:
            return
        self._progress_said[run.id] = mono
        first = live.first_step if run.first_step is None else None
        self.journal.record(RunProgress(run=run.id, step=step, first_step=first))

    # -- what outlives a run ----------------------------------------------------------
    def _end_leftovers(self, rid: str) -> None:
        """The run has exited: every process of it still alive gets SIGTERM, named."""
        run = self.journal.state.run(rid)
        procs = self._procs.pop(rid, None) or self.processes.tree(self.identity(rid), run.pid,
                                                                  run.pid_start)
        found = self.processes.terminate_all(procs.find())
        if found:
            grace = self.plan.grace_seconds
            self.journal.record(RunLeftovers(run=rid, signal="SIGTERM", grace_s=grace,
                                processes=[p.to_dict() for p in found]))
            self._leftovers[rid] = (self.monotonic(), found)

    @property
    def leftovers_pending(self) -> bool:
        """Leftovers SIGTERMed whose grace is not over yet (SIGKILL still to come)."""
        return bool(self._leftovers)

    def reap_leftovers(self) -> None:
        """Every tick: leftovers still alive after the grace get SIGKILL, named again."""
        mono = self.monotonic()
        for rid, (termed, found) in list(self._leftovers.items()):
            if mono - termed < self.plan.grace_seconds:
                continue
            del self._leftovers[rid]
            killed = self.processes.kill_all(found)
            if killed:
                self.journal.record(RunLeftoversKilled(run=rid, signal="SIGKILL",
                                    processes=[p.to_dict() for p in killed]))

    def refuse(self, rid: str, problem: str) -> None:
        """A file of the run's that the engine cannot use: said once in the ledger."""
        said = self._said.setdefault(rid, set())
        if problem not in said:
            said.add(problem)
            self.journal.record(WarningEvent(run=rid, message=f"{rid}: {problem}"))

    def _say_feed_trouble(self, rid: str, live: RunLive) -> None:
        """Once each: a source that is not a regular file (ignored), and output skipped to
        keep up (said again each time the skipped amount doubles)."""
        control = self.control.refused.get(rid)
        for problem in live.feeds.problems + ((control,) if control else ()):
            self.refuse(rid, problem)
        skipped = live.feeds.skipped
        if skipped and skipped >= 2 * self._skipped_said.get(rid, 0):
            self._skipped_said[rid] = skipped
            self.journal.record(WarningEvent(run=rid, skipped_bytes=skipped, backlog_bytes=live.feeds.backlog,
                message=f"{rid} writes faster than the engine reads: {skipped / 1e6:.0f} MB "
                        f"of its output skipped so far; the stop rules read its newest records"))

    def _acknowledge(self, rid: str, live: RunLive, now: float, exited: bool = False) -> None:
        """The run's own events, plus checkpoints its code wrote by itself (watched)."""
        events = live.take_events()
        watcher = self._watched.get(rid)
        if watcher is not None:
            step_at = live.step_times.at  # dates a file whose name says no step by its mtime
            events += watcher.drain(now, step_at=step_at) if exited \
                else watcher.poll(now, step_at=step_at)
            for problem in watcher.take_problems():
                self.journal.record(WarningEvent(run=rid, message=f"{rid}: {problem}"))
            if exited:
                self._watched.pop(rid, None)
        self.checkpoints.acknowledge(rid, events)

    def _pilot_bounds(self, run: RunState, live: RunLive, now: float, mono: float) -> None:
        """The engine bounds a pilot itself: scripts may ignore ITERA_MAX_STEPS."""
        pilot = self.plan.pilot
        if run.kind != "pilot" or not pilot or run.stop_requested:
            return
        step = live.global_step  # monotonic, even when the printed step restarts each epoch
        if pilot.steps and step is not None and step >= pilot.steps:
            # the pilot ends at its bound: a script past it (one that ignores
            # ITERA_MAX_STEPS and the control file) gets SIGTERM at once, the grace only
            # to exit, never to train on; one that stops at the bound is ending by itself
            # and gets the grace to do so, then the same SIGTERM
            reached = self._bound_reached_t.setdefault(run.id, mono)
            if step > pilot.steps or mono - reached >= self.plan.grace_seconds:
                self.request_stop(run, by="pilot_bound", reason=f"pilot bound reached "
                                  f"(step {step} of {pilot.steps})", now=now)
        elif pilot.hours and mono - live.started_mono > pilot.hours * 3600:
            self.request_stop(run, by="pilot", reason="pilot time box reached", now=now)

    def _exited(self, run: RunState) -> bool:
        popen = self._popen.get(run.id)
        if popen is not None:
            return popen.poll() is not None
        return not self.processes.same_process(run.pid, run.pid_start)

    def _exit_code(self, run: RunState) -> int | None:
        info = self.processes.read_exit(self.runs_dir / run.id)
        if info is not None:
            return info.get("exit_code")
        popen = self._popen.get(run.id)
        if popen is not None and popen.returncode is not None:
            return popen.returncode
        return None

    def gpu_sample(self, run: RunState, sample, now: float) -> None:
        """A probe sample against the `gpu_idle` rules of a live run on a GPU lot: its own
        GPUs' utilisation (`run_utils`) on the monotonic clock; when a rule fires, the run
        is asked for a checkpoint (unless it cannot read one) and stopped."""
        live = self._live.get(run.id)
        if live is None or not live.rules.watches_gpu or run.stop is not None \
                or run.stop_requested or not self._on_gpu_lot(run):
            return
        procs = self._procs.get(run.id)
        utils = run_utils(run, sample, procs.pids() if procs is not None else set())
        stop = live.rules.on_gpu(self.monotonic(), utils)
        if stop is None:
            return
        if run.kind != "step" and self.can_checkpoint(run):
            self.checkpoints.request(run, by="rule", now=now)
        self.fire(run, replace(stop, t=now), now)  # the wall time, for a person

    def _on_gpu_lot(self, run: RunState) -> bool:
        """A run on a `gpu = "CPU"` lot has no GPU of its own (its lane's device index is a
        placeholder there): GPU rules have no effect on it."""
        lots = [l for l in self.plan.lots if l.id == run.lot] or self.plan.lots
        return not all(l.cpu for l in lots)

    # -- stopping ----------------------------------------------------------------------
    def record_stop(self, rid: str, stop: Stop) -> None:
        fields = stop.to_dict()
        self.journal.record(StopRuleFired(run=rid, rule=fields["rule"],
                            reason=fields["reason"], value=fields["value"],
                            step=fields["step"], record_t=fields["t"]))

    def fire(self, run: RunState, stop: Stop, now: float) -> None:
        self.record_stop(run.id, stop)
        self.request_stop(run, by="rule", reason=f"{rule_label(stop.rule)}: {stop.reason}",
                          now=now)

    def request_stop(self, run: RunState, by: str, reason: str, now: float) -> None:
        """SIGTERM to the run's group now, SIGKILL after the grace. (A stop request of
        an older engine with `term_at`, a pilot bound's SIGTERM put off by a grace, is
        still carried out by `watch` after a restart.)"""
        previous = run.stop_requested
        if previous and previous.deadline:
            if previous.termed:  # asked again (a key, a restart): SIGTERM again
                self.processes.terminate(run.pid, run.pid_start, self.identity(run.id))
            return
        grace = self.plan.grace_seconds
        self.journal.record(RunStopRequested.with_grace(grace, run=run.id, by=by, reason=reason,
                                                        signal="SIGTERM"))
        self.control.write(run.id, "stop")
        self.processes.terminate(run.pid, run.pid_start, self.identity(run.id))
