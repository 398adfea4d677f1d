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
import tomllib
from typing import Callable

from ..campaign.notify_plan import redacted_raw
from ..campaign.plan import Plan
from .actions import EngineActions
from .checkpoints.box_down import BoxGoingDown, host_name
from .checkpoints.requests import Checkpoints
from .decision.answer import Decision
from .decision.point import DecisionPoint
from .clock import StepDetector, record_clock_step
from .reading.regular_files import append_regular
from .runs.control import ControlFiles
from .runs.port import HostProcesses, Processes
from .errors import EngineError, LedgerUnwritable
from .ledger.journal import Journal, Listener
from .lock import take_engine_lock
from .moves import apply_move, stored_reach
from .runs.launching import Launcher, base_env
from .ledger.damage import damage_warnings
from .ledger.file import check_can_open
from .watching.live import LiveView
from .decision.pilots import pilot_note
from .scheduler import Phase, phase_of
from .ledger.state import INFERRED, CampaignState
from .views import ENDED, EngineSnapshot  # noqa: F401  (re-exported)
from .checkpoints.queue import VerificationQueue
from .watching.watchdog import Watchdog
from .watching.watcher import RunWatcher
from .ledger.events import (CampaignStarted, DecidedBy, EngineStarted,
                            EngineStopped, Event, NoticeSent, WarningEvent, WindowStarted)

PLAN_CHECK_S = 5.0  # how often a running engine looks whether campaign.toml was edited


def _share(plan: Plan, lot: str | None):
    """This box's share: `lot`'s box (`run --lot`), else the lot the first box gave
    this folder (.itera/lot), else this box (every lot of a one-box plan)."""
    from ..campaign.boxes import LOT_FILE, recorded_lot, share_of_lot

    given = recorded_lot(plan.state_dir)
    if lot is not None and given is not None and lot != given:
        raise EngineError(f"--lot {lot}: this folder runs lot {given}'s share "
                          f"(.itera/{LOT_FILE}); a box runs one share")
    lot = lot or given
    try:
        return share_of_lot(plan, lot)
    except KeyError:
        names = ", ".join(l.id for l in plan.lots)
        raise EngineError(f"--lot {lot}: no such lot in this plan (lots: {names})") from None


class Engine:
    def __init__(self, plan: Plan, clock: Callable[[], float] = time.time,
                 poll_interval: float = 0.25, sample_interval: float = 10.0,
                 decide: Decision | None = None, idle_after_s: float = 600.0,
                 verify_bound: int = 1, monotonic: Callable[[], float] = time.monotonic,
                 lot: str | None = None, processes: Processes | None = None):
        self.plan = plan
        # the runs' processes: the box's own, or a stand-in (tests/fakeprocs.py)
        self.processes = processes or HostProcesses()
        self.share = _share(plan, lot)  # what this box drives of a campaign over boxes
        self.clock = clock
        self.monotonic = monotonic
        self._clock_steps = StepDetector()
        self._fatal: LedgerUnwritable | None = None  # the ledger cannot be written: stopped
        self.poll_interval = poll_interval
        self.sample_interval = sample_interval
        self.state_dir = plan.state_dir
        self.runs_dir = self.state_dir / "runs"
        self._lock = threading.RLock()
        self._lock_file = None
        # set by the session with [store]: may lay back, from the store, a ledger cut on
        # this box, before it is read (tui.store.ledger_guard); returns what to say
        self.before_ledger: Callable[[], list[str]] | None = None
        self._recovered: list[str] = []
        self._last_sample_t = float("-inf")
        self._plan_mark = None  # (mtime_ns, size) of campaign.toml when last compared
        self._plan_checked = monotonic()
        self.journal = Journal(self.state_dir / "ledger.jsonl", clock)
        control = ControlFiles(self.runs_dir)
        self.verifier = VerificationQueue(self.journal, self.runs_dir, base_env,
                                          bound=verify_bound, code_dir=plan.root)
        self.checkpoints = Checkpoints(plan, self.journal, control, self.verifier)
        self.watcher = RunWatcher(plan, self.journal, self.runs_dir, control,
                                  self.checkpoints, self.verifier, monotonic, self.processes)
        self.launcher = Launcher(plan, self.journal, self.runs_dir, self.share, self.processes)
        self.actions = EngineActions(plan, self.journal, self.watcher, self.checkpoints,
                                     self._lock)
        self.decision = DecisionPoint(plan, self.journal, clock, self._lock, decide)
        self._watchdog = Watchdog(idle_after_s)
        self.box_down = BoxGoingDown(
            self.journal, self.checkpoints, self.verifier, self.watcher.can_checkpoint, monotonic,
            exit_grace_s=plan.grace_seconds,
            stop=lambda run, reason: self.watcher.request_stop(
                run, by="box_going_down", reason=reason, now=self.clock()))

    # -- lifecycle -------------------------------------------------------
    def open(self) -> "Engine":
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._lock_file = take_engine_lock(self.state_dir)
        try:
            self._recovered = self.before_ledger() if self.before_ledger else []
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
        else:
            self._notice_plan_edit()
        if self.state.window_start is None:
            start = (self.plan.window.start.timestamp() if self.plan.window.start
                     else now)
            self.journal.record(WindowStarted(start=start,
                                end=start + self.plan.window_hours * 3600,
                                hours=self.plan.window_hours))
        apply_move(self.journal, self.state_dir, events, host_name(),  # `itera-tui resume`
                   reach=lambda rid: stored_reach(self.runs_dir / rid, self.plan.metrics))
        self.journal.record(EngineStarted(pid=os.getpid(), host=host_name()))
        self._report_damage()
        self.launcher.settle_intents(events)
        self.watcher.reattach(now)
        self.verifier.resume_unverified()
        return self

    def _report_damage(self) -> None:
        """Survivable ledger damage is said once, in the ledger itself (never skipped)."""
        known = {w.message for w in self.state.warnings}
        for message in self._recovered:  # a cut ledger laid back from the store
            self.journal.record(WarningEvent(message=message))
        for message in damage_warnings(self.journal.report, known):
            self.journal.record(WarningEvent(message=message))
        decided = self.state.decided
        if decided is not None and decided.by == INFERRED:
            message = (f"ledger: the decision after the pilot is missing (its decision_taken "
                       f"line was deleted); what followed shows it was \"{decided.text}\": "
                       "kept as taken, not asked again")
            if message not in known:
                self.journal.record(WarningEvent(message=message))
        for message in self.journal.tail_warnings():
            self.journal.record(WarningEvent(message=message))

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
                    self.journal.record(EngineStopped(pid=os.getpid()))
            except LedgerUnwritable as exc:
                self._fatal = exc
            finally:
                self.journal.close()
                self._release_lock()

    def _plan_sha256(self) -> str:
        return hashlib.sha256(self.plan.path.read_bytes()).hexdigest()

    def _freeze_plan(self) -> None:
        import tomli_w

        frozen = self.state_dir / "plan.toml"
        if not frozen.exists():
            tmp = frozen.with_suffix(".tmp")
            tmp.write_bytes(tomli_w.dumps(redacted_raw(self.plan.raw)).encode())  # no token
            os.replace(tmp, frozen)
        from .. import __version__

        self.journal.record(CampaignStarted(plan_sha256=self._plan_sha256(),
                            frozen_plan=".itera/plan.toml", tool_version=__version__))

    @property
    def state(self) -> CampaignState:
        return self.journal.state

    def subscribe(self, listener: Listener) -> None:
        """Called with every new ledger event, from the thread that records it."""
        self.journal.subscribe(listener)

    # -- the loop --------------------------------------------------------
    def _notice_plan_edit(self) -> None:
        """campaign.toml edited since the start: one warning per distinct edit (the
        frozen plan is kept: campaign.frozen); looked at again when the file changes."""
        from ..campaign.frozen import edit_warning

        note, self._plan_mark = edit_warning(self.plan.path, self._plan_mark)
        if note and note not in {w.message for w in self.state.warnings}:
            self.journal.record(WarningEvent(message=note))

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
            mono = self.monotonic()
            if mono - self._plan_checked >= PLAN_CHECK_S and self.state.started_t is not None:
                self._plan_checked = mono
                self._notice_plan_edit()
            record_clock_step(self._clock_steps, now, self.monotonic(), self.journal.record)
            for run in self.state.running:
                self.watcher.watch(run, now)
            self._say_listener_failures()
            self.watcher.reap_leftovers()
            self.verifier.poll()
            self._maybe_decide()
            if self.box_down.begun:
                return  # the box goes away: nothing new starts on it
            for launched in self.launcher.launch_ready(now):
                self.watcher.adopt(self.state.run(launched.run_id), launched.popen,
                                   launched.t)

    def end_leftovers(self, sleep: Callable[[float], None] = time.sleep) -> None:
        """Before the engine's process exits: what the runs left behind and got SIGTERM is
        given its grace and then SIGKILL, named, as the loop does tick by tick. An engine
        that exits first leaves a child that ignores SIGTERM (in its own session) for
        good: nobody would signal it again. Only leftovers are touched here: no tick, no
        launch. Bounded by the grace (on real monotonic time, whatever clock is injected)."""
        deadline = time.monotonic() + self.plan.grace_seconds + 5.0
        while True:
            with self._lock:
                try:
                    if self._fatal is None:
                        self.watcher.reap_leftovers()
                except LedgerUnwritable as exc:
                    self._fatal = exc
                if not self.watcher.leftovers_pending or self._fatal is not None:
                    return
            if time.monotonic() >= deadline:
                return
            sleep(min(0.1, self.poll_interval))

    def observe_probe(self, sample) -> list[str]:
        """A probe sample, taken by the session: the watchdog's warnings go to the
        ledger, each live run's `gpu_idle` rules read its GPUs in it, and every
        `sample_interval` one line joins each live run's raw measurements
        (`samples.jsonl`)."""
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
                self.journal.record(WarningEvent(message=message))
            for run in running:
                self.watcher.gpu_sample(run, sample, self.clock())
            return messages

    def _say_listener_failures(self) -> None:
        """A face that failed on an event (the socket's encoder, the notices, the mirror)
        is said once per distinct failure, as a warning; the tick itself goes on."""
        said = {w.message for w in self.state.warnings}
        for failure in self.journal.take_listener_failures():
            message = f"a reader of the ledger failed: {failure}"
            if message not in said:
                said.add(message)
                self.journal.record(WarningEvent(message=message))

    def warn(self, message: str) -> None:
        """A warning in the ledger from another thread (the notices' sender)."""
        with self._lock:
            if self.journal.opened:
                self.journal.record(WarningEvent(message=message))

    def record_notice(self, kind: str) -> None:
        """A once-per-campaign notice was sent (from the notices' thread): an engine
        started again reads it from the ledger and does not send it twice."""
        self.note(NoticeSent(kind=kind))

    def note(self, event: Event) -> None:
        """An event from another thread (the notices', the off-box store's mirror):
        under the engine's lock, like `warn`; nothing when the ledger is not open or
        can no longer be written (the engine has stopped on it and says so)."""
        with self._lock:
            if self.journal.opened and self._fatal is None:
                self.journal.record(event)

    def pending_verifications(self) -> int:
        with self._lock:
            return self.verifier.pending()

    # -- decisions ---------------------------------------------------------
    def _maybe_decide(self) -> None:
        if phase_of(self.plan, self.state, self.share) == Phase.DECISION:
            self.decision.step(self._pilot_figures)

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
                                   # where its rule fired, not where its grace ended
                                   "step": run.rule_step if run.rule_step is not None
                                   else view.last_step if view else None,
                                   **pilot_note(self.plan, run,
                                                view.final_metric if view else None,
                                                self.runs_dir / run.id)}
        return out

    # -- actions (the engine's public face; each is one ledger event first) ----
    def decide(self, decision: Decision, by: DecidedBy = DecidedBy.PERSON,
               note: str | None = None) -> None:
        """Answer the decision point (decision/point.py); an EngineError says why not."""
        self.decision.answer(decision, by, note)

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
                      bytes: int | None = None, unverified: dict | None = None) -> None:
        self.actions.record_wrapup(bundle, verified, failures, bytes, unverified)

    def box_going_down(self, signal: str, notice: str | None = None) -> None:
        """The system announced the box's end: record it, ask every live run for a
        checkpoint, launch nothing more (`checkpoints/box_down.py`)."""
        with self._lock:
            self.box_down.begin(signal, self.plan.shutdown_grace_seconds, self.clock(),
                                notice)

    def box_down_settled(self) -> bool:
        with self._lock:
            return self.box_down.settled()

    def box_down_finish(self) -> dict[str, str]:
        with self._lock:
            return self.box_down.finish()

    def checkpoint_interval_min(self) -> float | None:
        return self.checkpoints.interval_min()

    # -- views -------------------------------------------------------------
    @property
    def finished(self) -> bool:
        state = self.state
        return not state.running and phase_of(self.plan, state, self.share) in ENDED \
            and not self.watcher.leftovers_pending

    def snapshot(self) -> EngineSnapshot:
        with self._lock:
            state = self.state
            phase = phase_of(self.plan, state, self.share)
            return EngineSnapshot(t=self.clock(), state=state, phase=phase,
                                  live=self.watcher.views(),
                                  checkpoint_interval_min=self.checkpoints.interval_min(),
                                  finished=not state.running and phase in ENDED
                                  and not self.watcher.leftovers_pending,
                                  pending_verifications=self.verifier.pending())

    def live_view(self, rid: str) -> LiveView | None:
        with self._lock:
            return self.watcher.view(rid)
