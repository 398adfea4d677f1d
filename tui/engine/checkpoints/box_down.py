"""A box that announces its end: every live run checkpoints before the engine goes.

A system shutdown (or a provider reclaiming a spot box) sends SIGTERM to every
process at once and SIGKILL a little later. That is not a person's `engine
stop` (which comes over the socket and leaves the runs alone): the box and
everything on it is about to vanish. So the engine records `box_going_down`
with the runs that were live, asks each of them for a checkpoint through the
run protocol (the SDK saves on SIGTERM by itself too), keeps ticking so the
acknowledgements are read and verified in the fresh verifier process, and goes
once every run has settled or the grace (`[engine] shutdown_grace_seconds`) is
spent, whichever is first; `box_checkpointed` says what was kept. The runs the
signal ended are *cut* (`RunStatus.CUT`), not failed: the next engine, on this
box after a reboot or on another through `itera-tui resume`, continues them from
those checkpoints. Nothing here blocks a tick: `settled()` only reads the state.
"""

from __future__ import annotations

import socket
from typing import Callable

from ..ledger.journal import Journal
from ..ledger.state import RunState
from .queue import VerificationQueue
from .requests import Checkpoints
from ..ledger import events

EXIT_WAIT_S = 10.0  # at least this long for signalled runs to exit once they saved


def host_name() -> str:
    """The box's name as the ledger keeps it (`engine_started`, a move's "from which box")."""
    return socket.gethostname()


class BoxGoingDown:
    """The engine's last seconds on a box that goes away."""

    def __init__(self, journal: Journal, checkpoints: Checkpoints, verifier: VerificationQueue,
                 can_checkpoint: Callable[[RunState], bool], monotonic: Callable[[], float],
                 exit_grace_s: float = 30.0,
                 stop: Callable[[RunState, str], None] | None = None):
        self.journal = journal
        self.checkpoints = checkpoints
        self.verifier = verifier
        self.can_checkpoint = can_checkpoint  # a run speaking no run protocol never answers
        self.monotonic = monotonic
        self.exit_grace_s = exit_grace_s  # the runs' own stop grace (`[engine] grace_seconds`)
        self._saved_at: float | None = None  # every checkpoint asked for is in and judged
        self._since: float | None = None
        self._t: float | None = None
        self._grace = 0.0
        # a provider's notice comes before any signal: the runs are still training, so
        # once their checkpoints are in (or the grace is spent) the engine ends them
        # itself (`stop`: SIGTERM through the watcher), and they are cut, not killed
        # mid-write when the box goes
        self.stop = stop
        self._notice: str | None = None
        self._ended_live = False

    @property
    def begun(self) -> bool:
        return self._since is not None

    def begin(self, signal: str, grace_s: float, now: float, notice: str | None = None) -> None:
        if self.begun:
            return  # a shutdown signals the supervisor and the engine: one grace
        live = [r for r in self.journal.state.running]
        ev = self.journal.record(events.BoxGoingDown(signal=signal, grace_s=float(grace_s),
                                 runs=[r.id for r in live], host=host_name(), notice=notice))
        self._since, self._t, self._grace = self.monotonic(), float(ev.t), float(grace_s)
        self._notice = notice
        for run in live:
            if run.kind != "step" and self.can_checkpoint(run):
                self.checkpoints.request(run, by="box_going_down", now=now)

    def settled(self) -> bool:
        """Every run asked has left a checkpoint and its verdict, or has ended without
        one, and then has exited (the signal stops it) or had its stop grace to; or the
        box-down grace is spent."""
        if self._since is None:
            return False
        now = self.monotonic()
        state = self.journal.state
        runs = [state.run(rid) for rid in state.box_down.runs]
        if now - self._since >= self._grace:
            self._end_live(runs)
            return True
        if not all(self._run_settled(run) for run in runs):
            return False
        if self._saved_at is None:
            self._saved_at = now
            self._end_live(runs)
        # its exit recorded here makes it cut on this ledger, not only on the next engine's
        waited = now - self._saved_at
        return all(not r.alive for r in runs) or waited >= max(self.exit_grace_s, EXIT_WAIT_S)

    def _end_live(self, runs: list[RunState]) -> None:
        """After a notice, the runs still alive are ended by the engine (once)."""
        if self._notice is None or self.stop is None or self._ended_live:
            return
        self._ended_live = True
        for run in runs:
            if run.alive:
                try:
                    self.stop(run, f"the box is going down ({self._notice})")
                except OSError:  # gone meanwhile: its exit is read as any other
                    pass

    def _run_settled(self, run: RunState) -> bool:
        if self.verifier.pending_for(run.id):
            return False
        if run.kind == "step" or not self.can_checkpoint(run):
            return True
        fresh = [c for c in run.checkpoints if c.t >= self._t]
        if fresh:  # acknowledged since the announcement: settled once its verdict is in
            done = {v.path for v in run.verified}
            return all(c.path in done for c in fresh)
        return not run.alive  # still training and no checkpoint yet: wait for it

    def finish(self) -> dict[str, str]:
        """Say what the grace kept (run -> its last verified checkpoint); once."""
        state = self.journal.state
        saved, unsaved = {}, []
        for rid in state.box_down.runs:
            last = state.run(rid).last_verified_checkpoint
            if last is not None and last.path:
                saved[rid] = last.path
            else:
                unsaved.append(rid)
        waited = self.monotonic() - (self._since or self.monotonic())
        self.journal.record(events.BoxCheckpointed(saved=saved, unsaved=unsaved,
                            waited_s=round(waited, 3)))
        return saved
