"""What a person (or the command line) can ask of the engine.

Every action is one ledger event first, then its effect, under the engine's
lock, so it is safe from any thread and survives a restart. Refusals
(dropping a mandatory variant, stopping a run that is not running) are
EngineErrors with a message a user can act on; the session turns them into
values for the faces.
"""

from __future__ import annotations

import threading

from ..campaign.plan import Plan
from .checkpoints.requests import Checkpoints
from .errors import EngineError
from .ledger.journal import Journal
from .watching.watcher import RunWatcher
from .decision.answer import check_droppable
from .ledger.events import QueuePaused, QueueResumed, VariantDropped, WrapupDone, WrapupStarted


class EngineActions:
    def __init__(self, plan: Plan, journal: Journal, watcher: RunWatcher,
                 checkpoints: Checkpoints, lock: threading.RLock):
        self.plan = plan
        self.journal = journal
        self.watcher = watcher
        self.checkpoints = checkpoints
        self.lock = lock

    def drop_variant(self, vid: str, by: str = "user") -> None:
        with self.lock:
            check_droppable(self.plan, vid)
            if vid in self.journal.state.dropped:
                return
            self.journal.record(VariantDropped(variant=vid, reason=f"dropped by {by}"))
            for run in self.journal.state.running:
                if run.target == vid:
                    self.watcher.request_stop(run, by="user", reason="variant dropped",
                                              now=self.journal.clock())

    def _running(self, rid: str):
        try:
            run = self.journal.state.run(rid)
        except KeyError:
            raise EngineError(f"no run {rid!r}") from None
        if run.state != "running":
            raise EngineError(f"run {rid} is not running ({run.state})")
        return run

    def stop_run(self, rid: str, reason: str, by: str = "user") -> None:
        with self.lock:
            self.watcher.request_stop(self._running(rid), by=by, reason=reason,
                                      now=self.journal.clock())

    def request_checkpoint(self, rid: str, by: str = "user") -> int:
        with self.lock:
            run = self._running(rid)
            refusal = self.watcher.checkpoint_refusal(run) if by == "user" else None
            if refusal is not None:
                raise EngineError(refusal)
            return self.checkpoints.request(run, by=by, now=self.journal.clock())

    def set_paused(self, paused: bool) -> None:
        with self.lock:
            if paused != self.journal.state.paused:
                self.journal.record(QueuePaused() if paused else QueueResumed())

    def begin_wrapup(self) -> None:
        """Stop what still runs (the SDK checkpoints on SIGTERM), then wrap up."""
        with self.lock:
            wrap = self.journal.state.wrapup
            if wrap is None or wrap.state != "started":  # a rebuild starts again: each
                self.journal.record(WrapupStarted())  # wrapup_done has its own start
            now = self.journal.clock()
            for run in self.journal.state.running:
                if not run.stop_requested:
                    self.checkpoints.request(run, by="wrapup", now=now)
                    self.watcher.request_stop(run, by="wrapup", reason="stopped for wrap-up",
                                              now=now)

    def record_wrapup(self, bundle: str, verified: bool, failures: int,
                      bytes: int | None = None, unverified: dict | None = None) -> None:
        """The bundle's verdict and measured size (the retrieval estimate uses it);
        `unverified`: run id -> why its deliverable failed the bundle's check."""
        with self.lock:
            self.journal.record(WrapupDone(bundle=bundle, verified=verified,
                                failures=failures, bytes=bytes,
                                **({"unverified": unverified} if unverified else {})))
