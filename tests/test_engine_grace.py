"""The SIGKILL grace is counted from the stop request's own ledger stamp.

A rule fires inside a tick; the engine wrote the stop request's deadline as the
tick's start plus the grace, while the ledger stamped the request later (after the
rules had read the batch). The grace then lost the tick's duration: on a loaded box
a run was killed 0.997 s after a 1 s grace. The deadline is now the stamp plus the
grace, exactly, whatever the tick took. No process: the run has no pid, so no signal
can leave the test.
"""

from __future__ import annotations

from types import SimpleNamespace

from tui.engine.ledger.events import RunStopRequested
from tui.engine.ledger.file import read_ledger
from tui.engine.ledger.journal import Journal
from tui.engine.ledger.state import RunState, RunStatus
from tui.engine.runs.control import ControlFiles
from tui.engine.watching.watcher import RunWatcher


class SlowTick:
    """A wall clock the test moves: the tick started at `start`, the ledger writes later."""

    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_deadline_is_the_grace_after_the_request_s_own_stamp(tmp_path):
    clock = SlowTick(1_800_000_000.0)
    journal = Journal(tmp_path / "ledger.jsonl", clock)
    journal.open()
    plan = SimpleNamespace(grace_seconds=2.0, root=tmp_path)
    watcher = RunWatcher(plan, journal, tmp_path / "runs", ControlFiles(tmp_path / "runs"),
                         checkpoints=None, verifier=None, monotonic=lambda: 0.0)
    run = RunState(id="a-1", target="a", kind="pilot", category="mandatory", attempt=1,
                   config_hash="x", state=RunStatus.RUNNING, pid=None)
    tick_started = clock.now
    clock.now += 0.75  # the rules read a long batch: the request is written 0.75 s later
    watcher.request_stop(run, by="rule", reason="non_finite: loss nan", now=tick_started)
    (request,) = [ev for ev in read_ledger(journal.path) if isinstance(ev, RunStopRequested)]
    assert request.t == tick_started + 0.75
    assert request.deadline - request.t == 2.0  # the whole grace, from its own stamp


def test_a_request_built_with_its_grace_carries_it_in_its_line(tmp_path):
    from tui.engine.ledger.file import Ledger

    ledger = Ledger(tmp_path / "ledger.jsonl", clock=lambda: 1_800_000_000.5)
    written = ledger.append(RunStopRequested.with_grace(30.0, run="a-1", by="user",
                                                        reason="asked", signal="SIGTERM"))
    (read,) = read_ledger(ledger.path)
    assert written.deadline == read.deadline == 1_800_000_030.5
    assert read.to_record()["deadline"] == 1_800_000_030.5
