"""What a person (or the command line) can ask of the engine.

Every action is one ledger event first, then its effect, under the engine's
lock, so it is safe from the control room's worker threads and survives a
restart. Refusals (dropping a mandatory variant, stopping a run that is not
running) are EngineErrors with a message a user can act on.
"""

from __future__ import annotations

from .errors import EngineError


class ActionsMixin:
    """Part of Engine; uses its ledger, state, lock and plan."""

    def parse_decision(self, decision: str) -> tuple[str, list[str]]:
        """('continue'|'drop'|'wrapup', ids); an EngineError names what is wrong.

        Called before anything launches too (`--decide`), so a typo costs no
        GPU hour: it is refused at start, not after the pilot.
        """
        if decision.startswith("drop:"):
            drop = [d for d in decision[5:].split(",") if d]
            if not drop:
                raise EngineError("drop: needs at least one variant id (drop:ID[,ID])")
            for vid in drop:
                self._check_droppable(vid)
            return "drop", drop
        if decision not in ("continue", "wrapup"):
            raise EngineError(f"unknown decision {decision!r}: expected continue, "
                              "drop:ID[,ID] or wrapup")
        return decision, []

    def decide(self, decision: str, by: str = "user", note: str | None = None) -> None:
        """continue | drop:ID[,ID] | wrapup — only at the decision point."""
        with self._lock:
            kind, drop = self.parse_decision(decision)
            self._record("decision_taken", decision=kind, drop=drop, by=by, note=note)
            for vid in drop:
                self._record("variant_dropped", variant=vid, reason=f"decision by {by}")

    def _check_droppable(self, vid: str) -> None:
        try:
            variant = self.plan.variant(vid)
        except KeyError:
            raise EngineError(f"no variant {vid!r} to drop") from None
        if not variant.optional:
            raise EngineError(f"cannot drop {vid!r}: it is mandatory (needed to conclude); "
                              "only useful or exploratory variants can be dropped")

    def drop_variant(self, vid: str, by: str = "user") -> None:
        with self._lock:
            self._check_droppable(vid)
            if vid in self.state.dropped:
                return
            self._record("variant_dropped", variant=vid, reason=f"dropped by {by}")
            for run in self.state.running:
                if run.target == vid:
                    self._request_stop(run, by="user", reason="variant dropped",
                                       now=self.clock())

    def stop_run(self, rid: str, reason: str, by: str = "user") -> None:
        with self._lock:
            run = self.state.run(rid)
            if run.state != "running":
                raise EngineError(f"run {rid} is not running ({run.state})")
            self._request_stop(run, by=by, reason=reason, now=self.clock())

    def request_checkpoint(self, rid: str, by: str = "user") -> int:
        with self._lock:
            run = self.state.run(rid)
            if run.state != "running":
                raise EngineError(f"run {rid} is not running ({run.state})")
            return self._checkpoint(run, by=by, now=self.clock())

    def set_paused(self, paused: bool) -> None:
        with self._lock:
            if paused != self.state.paused:
                self._record("queue_paused" if paused else "queue_resumed")

    def begin_wrapup(self) -> None:
        """Stop what still runs (the SDK checkpoints on SIGTERM), then wrap up."""
        with self._lock:
            if self.state.wrapup is None:
                self._record("wrapup_started")
            now = self.clock()
            for run in self.state.running:
                if not run.stop_requested:
                    self._checkpoint(run, by="wrapup", now=now)
                    self._request_stop(run, by="wrapup", reason="stopped for wrap-up",
                                       now=now)

    def record_wrapup(self, bundle: str, verified: bool, failures: int,
                      bytes: int | None = None) -> None:
        """The bundle's verdict and measured size (the retrieval estimate uses it)."""
        with self._lock:
            self._record("wrapup_done", bundle=bundle, verified=verified, failures=failures,
                         bytes=bytes)

