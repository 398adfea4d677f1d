"""The engine's side of checkpoints: requests, acknowledgements, the interval.

Requests go to the run's control file (on a schedule, on a key, before a
wrap-up stop); the run acknowledges in its metrics stream (the SDK, a
framework callback, or a watched file); every acknowledged file is then
queued for verification in a fresh process (`verification.py`), and the
verdict goes to the ledger, where the `resume` rule and the views find it.
"""

from __future__ import annotations

from ...campaign.held import release
from .interval import checkpoint_interval_minutes
from ..runs.control import ControlFiles
from ..ledger.journal import Journal
from ..ledger.state import RunState
from .queue import VerificationQueue
from ..ledger.events import CheckpointAcknowledged, CheckpointRequested, ResumeCheckResult, WarningEvent

ACK_FIELDS = ("path", "sha256", "digest", "bytes", "write_s", "block_s", "step", "mode", "held")


class Checkpoints:
    def __init__(self, plan, journal: Journal, control: ControlFiles,
                 verifier: VerificationQueue):
        self.plan = plan
        self.journal = journal
        self.control = control
        self.verifier = verifier
        self._last_request_t: dict[str, float] = {}

    def adopt(self, run: RunState, started_t: float) -> None:
        """Start the schedule of a run from its last acknowledgement (or its start)."""
        acks = [c.t for c in run.checkpoints]
        self._last_request_t[run.id] = max([started_t] + acks)

    def acknowledge(self, rid: str, events: list[dict]) -> None:
        """Fold a run's own events (checkpoint, checkpoint_failed, resume_check) in."""
        state = self.journal.state
        known = {(c.path, c.digest or c.sha256): c.held for c in state.run(rid).checkpoints}
        warned = {w.message for w in state.warnings}
        for ev in events:
            kind = ev.get("event")
            if kind == "checkpoint" and isinstance(ev.get("path"), str):
                key = (ev.get("path"), ev.get("digest") or ev.get("sha256"))
                if key in known:
                    if ev.get("held") != known[key]:  # the same bytes held twice: one is enough
                        release(self.verifier.runs_dir / rid, ev.get("held"))
                    continue
                known[key] = ev.get("held")
                held = ev.get("held") if isinstance(ev.get("held"), str) else None
                by_time = ev.get("step_by_time")  # a watched file's step by its records
                by_time = by_time if by_time.__class__ is int else None
                self.journal.record(CheckpointAcknowledged(run=rid,
                                    **{k: ev.get(k) for k in ACK_FIELDS} | {"held": held},
                                    step_by_time=by_time))
                sha256 = ev.get("sha256")
                self.verifier.submit(rid, ev["path"], held,
                                     ev.get("step") if isinstance(ev.get("step"), int) else None,
                                     ev.get("step_by_time") if isinstance(
                                         ev.get("step_by_time"), int) else None,
                                     sha256=sha256 if isinstance(sha256, str) else None,
                                     keep=ev.get("mode") == "watched")
            elif kind == "checkpoint_failed":
                message = f"checkpoint of {rid} at step {ev.get('step')} FAILED: {ev.get('error')}"
                if message not in warned:  # the feed is re-read after a restart
                    warned.add(message)
                    self.journal.record(WarningEvent(message=message, run=rid))
            elif kind == "resume_check" and self.journal.state.run(rid).resume_check is None:
                self.journal.record(ResumeCheckResult(run=rid, ok=ev.get("ok") is True,
                                    steps_compared=ev.get("steps_compared"),
                                    max_abs_diff=ev.get("max_abs_diff"),
                                    problem=ev.get("problem")))

    def maybe_periodic(self, run: RunState, now: float) -> None:
        if run.kind != "run" or run.stop_requested:
            return
        interval = self.interval_min()
        if interval is None:
            return
        if now - self._last_request_t.get(run.id, now) >= interval * 60:
            self.request(run, by="schedule", now=now)

    def interval_min(self) -> float | None:
        costs = [c.write_s for r in self.journal.state.runs for c in r.checkpoints
                 if c.write_s is not None]
        measured = sorted(costs)[len(costs) // 2] if costs else None
        return checkpoint_interval_minutes(self.plan.checkpoint, measured)

    def request(self, run: RunState, by: str, now: float) -> int:
        seq = self.control.write(run.id, "checkpoint")
        self._last_request_t[run.id] = now
        self.journal.record(CheckpointRequested(run=run.id, request_seq=seq, by=by))
        return seq
