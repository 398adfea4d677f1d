"""CampaignSession: a campaign's plan, engine, probes and wrap-up, wired once.

Both faces drive a campaign through this class and nothing else: it ticks the
engine, samples the probes (once, here: the engine is handed the samples),
joins GPUs to runs, projects the end, concludes once the runs are over, runs
the wrap-up and applies actions. A refusal comes back as an `ActionResult`
value, never an exception across layers. Each `step()` returns one frozen
`SessionSnapshot`. Time is injected, so tests drive it with a fake clock.

What only a step needs (the estimate, the conclusion, the ending) is imported
by the step that needs it: the control room paints its first frame from
`replayed()` before any of it is loaded.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Callable

from ..campaign.calendar import build_calendar
from ..engine import Engine, EngineError
from ..engine.errors import LedgerUnwritable
from ..engine.engine import ENDED
from .probes import gpu_holders
from .loading import load_campaign  # noqa: F401  (its home is loading.py)
from .snapshot import ActionResult, Projection, SessionSnapshot, WrapupProgress
from .wrapup import WrapupJob
from ..engine.decision.answer import Decision
from ..engine.ledger.events import DecidedBy, Event, StoreAtRisk

DELIVERY_MARGIN = 1.5  # the measured delivery time, with room for a slower hour


class CampaignSession:
    def __init__(self, plan, engine: Engine | None = None, probes=None,
                 clock: Callable[[], float] = time.time, *, decide: Decision | None = None,
                 poll_interval: float = 0.25, sample_interval: float = 1.0,
                 wrapup_helpers=None):
        """`wrapup_helpers`: how the wrap-up starts git, the drawer and the verifier
        (tui.bundle.helpers.WrapupHelpers; the box's own when None)."""
        self.plan = plan
        self.wrapup_helpers = wrapup_helpers
        self.engine = engine or Engine(plan, clock=clock, poll_interval=poll_interval,
                                       decide=decide)
        self.probes = probes
        self.clock = clock
        self.poll_interval = poll_interval
        self.sample_interval = sample_interval
        self.calendar = build_calendar(plan)
        self._lock = threading.RLock()
        self._last_probe_t = float("-inf")
        self._probe = None
        self._conclusion_key: int | None = None
        self._conclusion = None
        self._ending_key: int | None = None
        self._ending_value = None
        self._wrapup: WrapupJob | None = None
        self._notices = None  # tui.notify.Notices, with [notify]
        self._mirror = None  # tui.store.mirror.Mirror, with [store]
        self._lease = None  # tui.store.lease.Lease, with [store]: one box drives at a time
        self._store_problem: str | None = None  # why [store] could not be mirrored
        self._said_at_risk = False

    # -- lifecycle ----------------------------------------------------------------
    def open(self) -> "CampaignSession":
        if self.plan.notify is not None:  # the notices: their own thread, fed by the ledger
            from ..notify import Notices
            from .ending import ending_of

            self._notices = Notices(self.plan, self.engine, self.clock, ending_of).start()
        if self.plan.store is not None:  # the off-box copy: its own thread, fed by the ledger
            from ..store.claim import without_store

            if without_store(self.plan.state_dir):  # the person said to go on without it
                self._store_problem = (f"[store] {self.plan.store.url}: not used: started "
                                       "with --without-store, so nothing of this campaign "
                                       "is kept off this box")
            else:
                self._start_mirror()
        try:
            self.engine.open()
        except BaseException:
            if self._notices is not None:
                self._notices.close()
            if self._mirror is not None:
                self._mirror.close(drain_s=0.0)
            raise
        if self._store_problem is not None:
            self.engine.warn(self._store_problem)
        if self._mirror is not None:  # whose campaign: known before the first tick
            from ..store.lease import hold

            hold(self._lease)
        return self

    def _start_mirror(self) -> None:
        try:
            from ..store.lease import engine_lease
            from ..store.ledger_guard import recover_before_open
            from ..store.mirror import Mirror

            # a ledger cut on this box is laid back from the store before it is read
            self.engine.before_ledger = lambda: recover_before_open(
                self.plan, getattr(self.engine, "share", None))
            mirror = Mirror(self.plan, self.engine, self.clock)
            self._lease = mirror.lease = engine_lease(mirror.store, mirror.layout.part,
                                                      self.plan.state_dir)
            self._mirror = mirror.start()
        except ImportError as exc:
            self._store_problem = (f"[store] {self.plan.store.url}: not mirrored: the store "
                                   f"needs fsspec ({exc}); pip install 'itera-tui[store]'")
        except Exception as exc:  # an unusable URL: said in the ledger, never a crash
            self._store_problem = (f"[store] {self.plan.store.url}: not mirrored: "
                                   f"{type(exc).__name__}: {exc}")

    def superseded(self) -> str | None:
        """Why this engine no longer drives the campaign (another box took it over at
        the store, `tui.store.lease`), None while it does or without [store]."""
        claim = self._lease.superseded if self._lease is not None else None
        return None if claim is None else claim.superseded_words()

    @property
    def mirror(self):
        """The off-box mirror (tui.store), None without [store]."""
        return self._mirror

    def close(self) -> None:
        """Stop driving: the runs live on in their own sessions."""
        with self._lock:
            if self._notices is not None:  # first: what it could not send reaches the ledger
                self._notices.close()
            if self._mirror is not None:  # the last ledger bytes go off the box, bounded
                self._mirror.close()
            if self._lease is not None:  # stopped driving: a resume needs no --force
                self._lease.release()
            self.engine.close()
            if self.probes is not None:
                self.probes.close()

    def __enter__(self) -> "CampaignSession":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    def subscribe(self, listener: Callable[[Event], None]) -> None:
        self.engine.subscribe(listener)

    def on_snapshot(self, callback: Callable[[], None]) -> bool:
        """In-process, the engine moves only when a face steps it: nothing to push."""
        return False

    def history(self, limit: int) -> list[Event]:
        """The last `limit` ledger events (up to the journal's memory), for a face that
        starts late: from memory, so a UI thread may ask."""
        return self.engine.journal.recent(limit)

    # -- the step -------------------------------------------------------------------
    def step(self, tick: bool = True, sample: bool = True) -> SessionSnapshot:
        with self._lock:
            error = None
            if tick and not self.wrapup_running:
                try:
                    self.engine.tick()
                except LedgerUnwritable:  # not a bad tick: the engine has stopped
                    raise
                except Exception as exc:  # the faces must outlive a bad tick
                    error = f"engine tick failed: {type(exc).__name__}: {exc}"
            if sample:
                self._sample_if_due()
            snap = self.engine.snapshot()
            now = self.clock()
            self._delivery_risk(snap.state, now)
            conclusion = self._conclude(snap)
            return SessionSnapshot(
                now=now, engine=snap, projection=self.projection(snap.state, now),
                probe=self._probe, holders=gpu_holders(self._probe, snap.state.running)
                if self._probe is not None else (),
                conclusion=conclusion, ending=self._ending(snap, conclusion, now),
                wrapup=self.wrapup_progress(), tick_error=error, store=self.store_status())

    def replayed(self) -> SessionSnapshot:
        """What the ledger alone says, from memory: no tick, no sampling, and none of the
        files the runs wrote (the conclusion and the estimate read them; the next
        `step()` brings them). Cheap enough for a UI thread to paint its first frame."""
        with self._lock:
            snap = self.engine.snapshot()
            now = self.clock()
            return SessionSnapshot(now=now, engine=snap,
                                   projection=self._calendar_projection(snap.state),
                                   wrapup=self.wrapup_progress(), store=self.store_status())

    def flush_store(self, timeout: float) -> bool:
        """The box is going down: wait, bounded, until the store holds what the ledger
        says (the verified checkpoints the next box resumes from). True when caught up."""
        if self._mirror is None:
            return True
        return self.superseded() is None and self._mirror.wait_caught_up(timeout)

    # -- the delivery to the store before the window ends ---------------------------
    def delivery_lead_s(self) -> float | None:
        """How long before the window's end the wrap-up must start for the bundle to be
        delivered and verified at the store in time (None: no store, or not timed yet)."""
        if self._mirror is None:
            return None
        est = self._mirror.delivery_estimate_s()
        if est is None:
            return None
        return self.plan.campaign.wrapup_hours * 3600.0 + est * DELIVERY_MARGIN + 60.0

    def wrapup_due_for_delivery(self, snap) -> bool:
        """The runs go on past the point where the delivery would still fit: time to
        wrap up (the wrap-up checkpoints what runs, then stops it)."""
        lead, end = self.delivery_lead_s(), snap.state.window_end
        if lead is None or end is None or snap.wrapup.running or snap.state.wrapup is not None:
            return False
        if snap.phase in ENDED and not snap.state.running:
            return False  # the runs are over: the ordinary wrap-up comes
        return end - snap.now <= lead

    def _delivery_risk(self, state, now: float) -> None:
        """One notice (store_at_risk) when the delivery can no longer finish before the
        window's end: a slow store, or one that does not answer near the end."""
        if self._mirror is None or self._said_at_risk or state.window_end is None \
                or state.wrapup is not None:
            return
        left = state.window_end - now
        est = self._mirror.delivery_estimate_s()
        down = self._mirror.status().down_since is not None
        lead = self.delivery_lead_s()
        why = None
        if est is not None and left > 0 and \
                est > left - self.plan.campaign.wrapup_hours * 3600.0 and est > 0:
            from ..campaign.units import human_duration

            why = (f"delivering the bundle to {self._mirror.store.label} is expected to take "
                   f"{human_duration(est)} at the store's measured rate, more than the "
                   f"{human_duration(max(0.0, left))} the window has left after the wrap-up: "
                   "extend the rental, or fetch the bundle from the box")
        elif down and lead is not None and 0 < left <= lead:
            from ..campaign.units import human_duration

            why = (f"the store {self._mirror.store.label} does not answer and the window "
                   f"ends in {human_duration(left)}: the bundle may not reach it in time")
        if why is not None:
            self._said_at_risk = True
            self.engine.note(StoreAtRisk(message=why))

    def store_status(self):
        """What is stored off the box (tui.store.status.MirrorStatus), None without one."""
        return self._mirror.status() if self._mirror is not None else None

    def _sample_if_due(self) -> None:
        now = self.clock()
        if self.probes is None or now - self._last_probe_t < self.sample_interval:
            return
        self._last_probe_t = now
        self._probe = self.probes.sample(now)
        self.engine.observe_probe(self._probe)

    def projection(self, state, now: float) -> Projection:
        """The engine's re-estimation after the pilot, else the plan calendar."""
        try:
            from ..engine.estimate import project

            p = project(self.plan, state, self.plan.state_dir / "runs", now)
            if p.projected_end_t is not None:
                return Projection(p.planned_end_t, p.projected_end_t, "estimate")
        except (OSError, ValueError, ArithmeticError):  # a run file the estimate cannot use:
            pass  # the calendar's projection stands (the estimate's inputs are hostile files)
        return self._calendar_projection(state)

    def _calendar_projection(self, state) -> Projection:
        if state.window_start is None:
            return Projection(None, None, "none")
        end = state.window_start + self.calendar.end_to_end_hours * 3600.0
        return Projection(end, end, "calendar")

    def _ending(self, snap, conclusion, now: float):
        """Verdict, budget and bundle, once the runs are over (cached per ledger event)."""
        if conclusion is None:
            return None
        if self._ending_key != snap.state.events:
            from .ending import ending_of

            self._ending_value = ending_of(self.plan, snap.state, now, conclusion)
            self._ending_key = snap.state.events
        window_left = None if snap.state.window_end is None else snap.state.window_end - now
        return replace(self._ending_value, window_left_s=window_left)

    def _conclude(self, snap):
        if snap.phase not in ENDED or snap.state.running:
            return None
        if self._conclusion_key != snap.state.events:
            from ..engine.conclusion.outcome import conclude

            self._conclusion = conclude(self.plan, snap.state, self.plan.state_dir / "runs")
            self._conclusion_key = snap.state.events
        return self._conclusion

    # -- actions: refusals are values ---------------------------------------------
    def _act(self, fn, done: str) -> ActionResult:
        try:
            out = fn()
        except EngineError as exc:
            return ActionResult(False, str(exc))
        return ActionResult(True, done.format(out=out))

    def checkpoint(self, run_id: str) -> ActionResult:
        """Asks the run for a checkpoint; the engine refuses a run that can never answer
        (engine/checkpoints/answerable.py), in the words every face shows."""
        from ..engine.checkpoints.answerable import awaiting_first_record
        from .refusals import checkpoint_sent_text

        run = self._run_or_none(run_id)
        live = self.engine.live_view(run_id) if run is not None else None
        waiting = run is not None and awaiting_first_record(
            run, live.records if live is not None else None)
        return self._act(lambda: self.engine.request_checkpoint(run_id),
                         checkpoint_sent_text(run_id, waiting))

    def drop(self, variant_id: str, at_decision: bool = False,
             by: DecidedBy = DecidedBy.PERSON) -> ActionResult:
        return self.drop_many([variant_id], at_decision, by)

    def drop_many(self, variant_ids, at_decision: bool = False,
                  by: DecidedBy = DecidedBy.PERSON) -> ActionResult:
        """Drop several optional variants (at the decision point: one decision, by `by`)."""
        ids = list(variant_ids)
        if at_decision:
            try:
                decision = Decision.drop(*ids)
            except EngineError as exc:
                return ActionResult(False, str(exc))
            return self.decide(decision, by)
        results = [self._act(lambda vid=vid: self.engine.drop_variant(vid),
                             f"variant {vid} dropped") for vid in ids]
        bad = [r for r in results if not r.ok]
        return bad[0] if bad else ActionResult(True, "; ".join(r.message for r in results))

    def _run_or_none(self, run_id: str):
        return next((r for r in self.engine.state.runs if r.id == run_id), None)

    def shutdown_refusal(self) -> ActionResult | None:
        """Why the engine may not stop now (a bundle being built), else None."""
        if self.wrapup_running:
            return ActionResult(False, "the wrap-up is building the bundle: stopping the "
                                "engine now would leave it half-made; wait for it (the "
                                "room or `itera-tui status` shows its progress)")
        return None

    def stop(self, run_id: str, reason: str) -> ActionResult:
        return self._act(lambda: self.engine.stop_run(run_id, reason),
                         f"stop requested for {run_id}")

    def pause(self, paused: bool) -> ActionResult:
        return self._act(lambda: self.engine.set_paused(paused),
                         "queue paused: nothing new starts; running runs go on" if paused
                         else "queue resumed")

    def decide(self, decision: Decision, by: DecidedBy = DecidedBy.PERSON) -> ActionResult:
        """Answer the decision point (engine/decision/point.py), as `by`."""
        return self._act(lambda: self.engine.decide(decision, by=by),
                         f"decision recorded: {decision.words}")

    # -- the wrap-up -----------------------------------------------------------------
    @property
    def wrapup_running(self) -> bool:
        return self._wrapup is not None and self._wrapup.running

    def wrapup_progress(self) -> WrapupProgress:
        return self._wrapup.progress() if self._wrapup is not None else WrapupProgress()

    def start_wrapup(self, on_line: Callable[[str], None] | None = None) -> ActionResult:
        """In a thread: the control room stays live while the bundle is built."""
        with self._lock:
            if self.wrapup_running:
                return ActionResult(False, "the wrap-up is already running")
            self._wrapup = WrapupJob(self.engine, self.poll_interval, on_line, self._mirror,
                                     self.wrapup_helpers)
            self._wrapup.start()
            return ActionResult(True, "wrap-up started")

    def wrapup(self, on_line: Callable[[str], None] | None = None) -> WrapupProgress:
        """Inline, for the command line: returns once the bundle is verified or not."""
        with self._lock:
            self._wrapup = WrapupJob(self.engine, self.poll_interval, on_line, self._mirror,
                                     self.wrapup_helpers)
        self._wrapup.run()
        return self._wrapup.progress()

    def wait_wrapup(self, timeout: float | None = None) -> WrapupProgress:
        if self._wrapup is not None:
            self._wrapup.wait(timeout)
        return self.wrapup_progress()
