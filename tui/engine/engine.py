"""The campaign engine: one loop that launches, watches and stops runs.

One engine, two faces: `itera-tui run --headless` and the control room drive
it through `tui.session.CampaignSession`. Every fact goes to the journal (the
ledger) first; the in-memory state is the ledger replayed, so a restart (even
after kill -9) reattaches to runs still alive and records those that ended
meanwhile. The engine is composed of parts with one job each, wired here and
nowhere else: the launcher, the run watcher, checkpoints and their
verification queue, the actions a person may take, and the watchdog. Time is
injected: `clock` (wall time, for the ledger and what a person reads) and
`monotonic` (every "how long since" it acts on, see tui.engine.clock); the
engine never samples probes itself: it is handed samples (`observe_probe`).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

from ..campaign.plan import Plan
from .actions import EngineActions, parse_decision
from .checkpoints import Checkpoints
from .clock import StepDetector, record_clock_step
from .regular_files import append_regular
from .control import ControlFiles
from .errors import EngineError, LedgerUnwritable
from .journal import Journal, Listener
from .lock import take_engine_lock
from .launching import Launcher, base_env
from .ledger_report import check_can_open, damage_warnings
from .live import LiveView
from .scheduler import phase_of
from .state import CampaignState
from .verification import VerificationQueue
from .watchdog import Watchdog
from .watching import RunWatcher

ENDED = ("finished", "wrapup", "done", "blocked")  # nothing more will launch: time to wrap up


@dataclass(frozen=True)
class EngineSnapshot:
    """Everything a view needs from the engine, frozen: safe to hand between threads."""

    t: float
    state: CampaignState
    phase: str
    live: dict  # run id -> LiveView
    checkpoint_interval_min: float | None
    finished: bool
    pending_verifications: int = 0


class Engine:
    def __init__(self, plan: Plan, clock: Callable[[], float] = time.time,
                 poll_interval: float = 0.25, sample_interval: float = 10.0,
                 decide: str | None = None, idle_after_s: float = 600.0,
                 verify_bound: int = 1, monotonic: Callable[[], float] = time.monotonic):
        self.plan = plan
        self.clock = clock
        self.monotonic = monotonic
        self._clock_steps = StepDetector()
        self._fatal: LedgerUnwritable | None = None  # the ledger cannot be written: stopped
        self.poll_interval = poll_interval
        self.sample_interval = sample_interval
        self.auto_decision = decide or ("continue" if plan.pilot and
                                        plan.pilot.decide == "continue" else None)
        self._decision_source = "cli" if decide else "config"
        self.state_dir = plan.state_dir
        self.runs_dir = self.state_dir / "runs"
        self._lock = threading.RLock()
        self._lock_file = None
        self._last_sample_t = float("-inf")
        self.journal = Journal(self.state_dir / "ledger.jsonl", clock)
        control = ControlFiles(self.runs_dir)
        self.verifier = VerificationQueue(self.journal, self.runs_dir, base_env,
                                          bound=verify_bound, code_dir=plan.root)
        self.checkpoints = Checkpoints(plan, self.journal, control, self.verifier)
        self.watcher = RunWatcher(plan, self.journal, self.runs_dir, control,
                                  self.checkpoints, self.verifier, monotonic)
        self.launcher = Launcher(plan, self.journal, self.runs_dir)
        self.actions = EngineActions(plan, self.journal, self.watcher, self.checkpoints,
                                     self._lock)
        self._watchdog = Watchdog(idle_after_s)

    # -- lifecycle -------------------------------------------------------
    def open(self) -> "Engine":
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._lock_file = take_engine_lock(self.state_dir)
        try:
            report = check_can_open(self.state_dir, strict_run_dirs=True)  # never relaunch
            events = self.journal.open(report)  # the ledger is read once at open
            return self._opened(events)
        except EngineError as exc:
            self._fatal = exc if isinstance(exc, LedgerUnwritable) else None
            self._release_lock()
            raise

    def _opened(self, events: list[dict]) -> "Engine":
        now = self.clock()
        if self.state.started_t is None:
            self._freeze_plan()
        elif self.state.plan_sha256 != self._plan_sha256():
            self.journal.record("warning", message="campaign.toml changed since the campaign "
                                "started; the frozen plan in .itera/plan.toml is kept as planned")
        if self.state.window_start is None:
            start = (self.plan.window.start.timestamp() if self.plan.window.start
                     else now)
            self.journal.record("window_started", start=start,
                                end=start + self.plan.window_hours * 3600,
                                hours=self.plan.window_hours)
        self.journal.record("engine_started", pid=os.getpid())
        self._report_damage()
        self.launcher.settle_intents(events)
        self.watcher.reattach(now)
        self.verifier.resume_unverified()
        return self

    def _report_damage(self) -> None:
        """Survivable ledger damage is said once, in the ledger itself (never skipped)."""
        known = {w.message for w in self.state.warnings}
        for message in damage_warnings(self.journal.report, known):
            self.journal.record("warning", message=message)
        for message in self.journal.tail_warnings():
            self.journal.record("warning", message=message)

    def _release_lock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def close(self) -> None:
        """Leave the runs alone (they live in their own sessions); reap our verifiers."""
        with self._lock:
            try:
                self.verifier.close()
                if self.journal.opened and self.fatal is None:
                    self.journal.record("engine_stopped", pid=os.getpid())
            except LedgerUnwritable as exc:
                self._fatal = exc
            finally:
                self._release_lock()

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

        self.journal.record("campaign_started", plan_sha256=self._plan_sha256(),
                            frozen_plan=".itera/plan.toml", tool_version=__version__)

    @property
    def state(self) -> CampaignState:
        return self.journal.state

    def subscribe(self, listener: Listener) -> None:
        """Called with every new ledger event, from the thread that records it."""
        self.journal.subscribe(listener)

    # -- the loop --------------------------------------------------------
    def tick(self) -> None:
        """One pass; a ledger that cannot be written stops the engine (LedgerUnwritable)."""
        with self._lock:
            if self._fatal is not None:
                raise self._fatal
            try:
                self._tick()
            except LedgerUnwritable as exc:
                self._fatal = exc
                raise

    @property
    def fatal(self) -> str | None:  # why the engine stopped (its ledger cannot be written)
        return None if self._fatal is None else str(self._fatal)

    def _tick(self) -> None:
        with self._lock:
            now = self.clock()
            record_clock_step(self._clock_steps, now, self.monotonic(), self.journal.record)
            for run in self.state.running:
                self.watcher.watch(run, now)
            self.watcher.reap_leftovers()
            self.verifier.poll()
            self._maybe_decide()
            for launched in self.launcher.launch_ready(now):
                self.watcher.adopt(self.state.run(launched.run_id), launched.popen,
                                   launched.t)

    def observe_probe(self, sample) -> list[str]:
        """A probe sample, taken by the session: the watchdog's warnings go to the
        ledger, and every `sample_interval` one line joins each live run's raw
        measurements (`samples.jsonl`)."""
        with self._lock:
            now = self.monotonic()
            running = self.state.running
            if now - self._last_sample_t >= self.sample_interval:
                self._last_sample_t = now
                line = (json.dumps(sample.to_dict()) + "\n").encode()
                for run in running:
                    try:  # the run's directory is the run's: a FIFO there never blocks us
                        append_regular(self.runs_dir / run.id / "samples.jsonl", line)
                    except OSError as exc:
                        self.watcher.refuse(run.id, f"samples.jsonl: {exc.strerror or exc}")
            ended = [r for r in self.state.runs if r.state != "running" and r.devices]
            messages = self._watchdog.check(now, sample, running, ended)
            for message in messages:
                self.journal.record("warning", message=message)
            return messages

    def pending_verifications(self) -> int:
        with self._lock:
            return self.verifier.pending()

    # -- decisions ---------------------------------------------------------
    def _maybe_decide(self) -> None:
        state = self.state
        if phase_of(self.plan, state) != "decision":
            return
        if state.decision_pending is None:
            self.journal.record("decision_pending", pilot=self._pilot_figures())
        if self.auto_decision:
            decision, self.auto_decision = self.auto_decision, None
            self.actions.decide(decision, by=self._decision_source)

    def _pilot_figures(self) -> dict:
        out = {}
        for run in self.state.runs:
            if run.kind == "pilot":
                view = self.watcher.view(run.id)
                out[run.target] = {"run": run.id, "state": run.state,
                                   "stop": run.stop.to_dict() if run.stop else None,
                                   "metric": view.final_metric if view else None,
                                   "best": view.best_metric if view else None,
                                   "last_loss": view.last_loss if view else None,
                                   "step": view.last_step if view else None}
        return out

    # -- actions (the engine's public face; each is one ledger event first) ----
    def parse_decision(self, decision: str) -> tuple[str, list[str]]:
        return parse_decision(self.plan, decision)

    def decide(self, decision: str, by: str = "user", note: str | None = None) -> None:
        self.actions.decide(decision, by, note)

    def drop_variant(self, vid: str, by: str = "user") -> None:
        self.actions.drop_variant(vid, by)

    def stop_run(self, rid: str, reason: str, by: str = "user") -> None:
        self.actions.stop_run(rid, reason, by)

    def request_checkpoint(self, rid: str, by: str = "user") -> int:
        return self.actions.request_checkpoint(rid, by)

    def set_paused(self, paused: bool) -> None:
        self.actions.set_paused(paused)

    def begin_wrapup(self) -> None:
        self.actions.begin_wrapup()

    def record_wrapup(self, bundle: str, verified: bool, failures: int,
                      bytes: int | None = None) -> None:
        self.actions.record_wrapup(bundle, verified, failures, bytes)

    def checkpoint_interval_min(self) -> float | None:
        return self.checkpoints.interval_min()

    # -- views -------------------------------------------------------------
    @property
    def finished(self) -> bool:
        state = self.state
        return not state.running and phase_of(self.plan, state) in ENDED

    def snapshot(self) -> EngineSnapshot:
        with self._lock:
            state = self.state
            phase = phase_of(self.plan, state)
            return EngineSnapshot(t=self.clock(), state=state, phase=phase,
                                  live=self.watcher.views(),
                                  checkpoint_interval_min=self.checkpoints.interval_min(),
                                  finished=not state.running and phase in ENDED,
                                  pending_verifications=self.verifier.pending())

    def live_view(self, rid: str) -> LiveView | None:
        with self._lock:
            return self.watcher.view(rid)
