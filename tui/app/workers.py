"""Everything the control room does off the UI thread.

Engine ticks, probe sampling, reading the ledger, engine actions and the
wrap-up all touch files or processes, so each runs in a thread worker and
hands back frozen data through messages. `set_interval` only schedules these;
a tick is never started while the previous one is still running, and a
snapshot is posted when the ledger moved, and otherwise at most once per
`refresh_interval` (and every few seconds for the clocks), so a quiet campaign
costs almost nothing for days.
"""

from __future__ import annotations

import threading
import time

from ..engine.errors import EngineError
from ..engine.ledger import read_ledger
from ..probes import runs_on_devices
from .messages import (HistoryLoaded, LedgerEvent, Notice, ProbeUpdated, RoomUpdated,
                       WrapupFinished, WrapupProgress)
from .room import RoomSnapshot, project_end, signature
from ..engine.watchdog import run_devices

HISTORY_EVENTS = 300
CLOCK_REFRESH_S = 5.0  # countdown and ages move even when nothing else does


class WorkersMixin:
    """Thread work of ControlRoom; expects plan, engine, probes, clock, calendar."""

    def _init_workers(self) -> None:
        self._gate = threading.Lock()  # one engine pass at a time; detach waits for it
        self._detached = False
        self._tick_busy = False
        self._probe_busy = False
        self._history_loaded = False
        self._relay_ready = False
        self._last_events = None
        self._last_sig = None
        self._last_post = 0.0
        self._last_error = None
        self._conclusion_cache: tuple[int, str | None] | None = None
        self._conclusion_logged: str | None = None
        self._wrapup_running = False
        self.wrapup_result: tuple[bool, str] | None = None

    # -- engine events, from whatever thread the engine runs in ------------
    def _relay_event(self, ev: dict) -> None:
        if self._relay_ready and not self._detached:
            self.post_message(LedgerEvent(ev))

    # -- the engine tick -----------------------------------------------------
    def _schedule_tick(self) -> None:
        if self._tick_busy or self._detached:
            return
        self._tick_busy = True
        self.run_worker(self._tick_work, thread=True, group="tick", exit_on_error=False)

    def _tick_work(self) -> None:
        try:
            with self._gate:
                if self._detached:
                    return
                if not self._history_loaded:
                    self._load_history()
                if not self._wrapup_running:
                    self.engine.tick()
                snap = self.engine.snapshot()
            self._publish(snap)
            self._last_error = None
        except Exception as exc:  # the room must outlive a bad tick
            text = f"engine tick failed: {type(exc).__name__}: {exc}"
            if text != self._last_error:
                self._last_error = text
                self.post_message(Notice(text, "error", "engine", log=True, t=self.clock()))
        finally:
            self._tick_busy = False

    def _load_history(self) -> None:
        self._relay_ready = True
        self._history_loaded = True
        ledger = getattr(self.engine, "ledger", None)
        path = getattr(ledger, "path", None) or (self.plan.state_dir / "ledger.jsonl")
        events = read_ledger(path)[-HISTORY_EVENTS:]
        self.post_message(HistoryLoaded(events))

    def _publish(self, snap, force: bool = False) -> None:
        mono = time.monotonic()
        sig = signature(snap)
        moved = snap.state.events != self._last_events
        due = mono - self._last_post >= self.refresh_interval
        if not (force or moved or (sig != self._last_sig and due)
                or mono - self._last_post >= CLOCK_REFRESH_S):
            return
        self._last_events, self._last_sig, self._last_post = snap.state.events, sig, mono
        now = self.clock()
        projection = project_end(self.plan, self.calendar, snap.state, now)
        room = RoomSnapshot(now=now, engine=snap, projection=projection,
                            conclusion=self._conclusion(snap))
        self.post_message(RoomUpdated(room))

    def _conclusion(self, snap) -> str | None:
        """The header's few words; the full sentence with figures goes to the log once."""
        if snap.phase not in ("finished", "wrapup", "blocked") or snap.state.running:
            return None
        key = snap.state.events
        if self._conclusion_cache is None or self._conclusion_cache[0] != key:
            try:
                from ..engine.outcome import conclude

                found = conclude(self.plan, snap.state, self.plan.state_dir / "runs")
                headline, text = found.headline, found.text
            except Exception as exc:
                headline = text = f"(no conclusion: {type(exc).__name__}: {exc})"
            if text != self._conclusion_logged:
                self._conclusion_logged = text
                self.post_message(Notice(f"conclusion: {text}", "information", "conclusion",
                                         log=True, t=self.clock()))
            self._conclusion_cache = (key, headline)
        return self._conclusion_cache[1]

    # -- probes --------------------------------------------------------------
    def _schedule_probe(self) -> None:
        if self.probes is None or self._probe_busy or self._detached:
            return
        self._probe_busy = True
        self.run_worker(self._probe_work, thread=True, group="probe", exit_on_error=False)

    def _probe_work(self) -> None:
        try:
            now = self.clock()
            sample = self.probes.sample(now)
            room = self.room
            running = room.state.running if room is not None else []
            holders: dict[int, list[str]] = {}
            if sample.gpu.devices:
                pids = {r.id: r.pid for r in running if r.pid}
                holders = {k: list(v) for k, v in runs_on_devices(sample.gpu, pids).items()}
            for run in running:  # the lanes the engine assigned (CUDA_VISIBLE_DEVICES)
                for index in run_devices(run):
                    names = holders.setdefault(index, [])
                    if run.id not in names:
                        names.append(run.id)
            warnings = self.engine.observe_probe(sample)  # recorded in the ledger too
            self.post_message(ProbeUpdated(sample, holders, warnings, now))
        except Exception as exc:
            text = f"probe failed: {type(exc).__name__}: {exc}"
            if text != self._last_error:
                self._last_error = text
                self.post_message(Notice(text, "warning", "probes", log=True, t=self.clock()))
        finally:
            self._probe_busy = False

    # -- actions ---------------------------------------------------------------
    def _engine_action(self, label: str, fn, done: str | None = None, then=None) -> None:
        """Run an engine action in a worker; a refusal comes back as an error notice."""

        def work():
            try:
                fn()
            except EngineError as exc:
                self.post_message(Notice(str(exc), "error", f"{label} refused"))
                return
            except Exception as exc:
                self.post_message(Notice(f"{type(exc).__name__}: {exc}", "error",
                                         f"{label} failed"))
                return
            if done:
                self.post_message(Notice(done, "information", label))
            if then is not None:
                self.post_message(then)

        self.run_worker(work, thread=True, group="action", exit_on_error=False)

    # -- wrap-up ---------------------------------------------------------------
    def _wrapup_work(self) -> None:
        ok, text, in_ledger = False, "wrap-up failed", False
        try:
            from ..engine.headless import finish_wrapup

            code = finish_wrapup(self.engine, poll_interval=self.tick_interval,
                                 progress=lambda m: self.post_message(WrapupProgress(str(m))))
            wrap = self.engine.state.wrapup or {}
            ok, in_ledger = code == 0, True
            text = (f"bundle verified: {wrap.get('bundle')}" if ok else
                    f"bundle NOT verified ({wrap.get('failures')} failures): {wrap.get('bundle')}")
        except ImportError as exc:
            text = (f"wrap-up unavailable: the bundle builder cannot be imported ({exc}). "
                    "Runs were not touched; run `itera-tui wrapup` once it is installed.")
        except Exception as exc:
            text = f"wrap-up failed: {type(exc).__name__}: {exc}"
        finally:
            self.wrapup_result = (ok, text)  # read by run_app when the screen is gone
            self._wrapup_running = False
        self.post_message(WrapupFinished(ok, text, in_ledger))

    def detach(self) -> None:
        """Stop driving the engine (waits for a tick in flight); runs are untouched."""
        with self._gate:
            self._detached = True
