"""A store that turns slow or silent, then the box is lost: `resume` continues each run
from a stored checkpoint no older than the newest the store held when it turned
(issue 45 item 5, end to end). A real engine and real runs (tests/scripts/resumable.py)
on moto's S3 behind the proxy of tests/storekit.py, whose rate changes in place: a few
hundred bytes a second, or a black hole (connections accepted, nothing answered).

Every process the test starts is ended by pid in a `finally` (`kill_box`); the fixture
ends moto and the proxy.
"""

from __future__ import annotations

import pytest

from conftest import needs
from servicekit import wait_until
from storekit import s3  # noqa: F401  (s3: the fixture)
from test_box_move_store import (continue_on_a_new_box, events, kill_box, long_runs,
                                 newest_stored_steps, of, start_mid_runs, steps_logged,
                                 stored_view)
from tui.engine import replay
from tui.store.status import read_status

pytestmark = [needs("s3fs", "moto", "torch"), pytest.mark.slow]

SLOW = 200  # bytes/s each way: a request of a few KB takes tens of seconds
FAULTS = {"slow": SLOW, "silent": 0}


def newest_verified(root) -> dict[str, int]:
    """run -> the step of its newest verified checkpoint in the box's own ledger."""
    return {r.id: r.last_verified_checkpoint.step for r in long_runs(root)
            if r.alive and r.last_verified_checkpoint is not None}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_store_slow_or_silent_then_a_lost_box_resumes_no_older_than_before(s3, tmp_path,
                                                                             fault):
    s3.make_bucket("camp")
    old, new = tmp_path / "old", tmp_path / "new"
    try:
        start_mid_runs(old, s3.endpoint, steps=4000)  # control and b live, quick done, stored
        # the store caught up: it holds each live run's newest verified checkpoint
        wait_until(lambda: newest_verified(old) and newest_verified(old).items() <=
                   newest_stored_steps(s3.direct, "team").items(), 120,
                   "the store holding each live run's newest verified checkpoint")
        s3.change(FAULTS[fault])
        # what the store held as it turned (read past the proxy): the floor
        floor = newest_stored_steps(s3.direct, "team")
        runs = sorted(r.id for r in long_runs(old) if r.alive)
        assert runs and set(runs) <= set(floor), (runs, floor)
        # each run verifies a newer checkpoint the store may never get
        wait_until(lambda: all(newest_verified(old).get(rid, 0) > floor[rid] for rid in runs),
                   120, "a checkpoint newer than the floor verified for each run")
        # the faces say the store lacks what the box verified, while its request still
        # waits (not only once given up, transfer.STALL_S later)
        said = wait_until(lambda: (st := read_status(old / ".itera")) is not None and
                          st.lacks[0] >= 1 and st, 300, "the status saying what the store lacks")
        assert said.silent_since is None, said
        assert "behind; the store lacks" in said.text(), said.text()
        local = newest_verified(old)
        kill_box(old)  # the box is lost: every process at once
    finally:
        kill_box(old)
    stored = newest_stored_steps(s3.direct, "team")
    # the fault held something back: a resume here cannot simply take the newest
    assert any(stored.get(rid, 0) < local[rid] for rid in runs), (stored, local)
    s3.throttle(None)  # a new box reaches the store at full speed (held requests dropped)
    _, seen = stored_view(s3.endpoint, "team")
    cut = sorted(r.id for r in seen.runs if r.kind == "run" and r.alive)
    assert cut == runs, (cut, runs)
    try:  # a new box resumes, each cut run continued and training
        continue_on_a_new_box(old, new, s3.endpoint, "team", runs, steps=3)
        launched = of(new, "run_launched")
        state = replay(events(new))
    finally:
        kill_box(new)
    (moved,) = of(new, "campaign_moved")
    assert sorted(moved["cut"]) == runs
    # no run started over: every run launched on the new box continues a cut one (quick,
    # finished and stored before the fault, is not launched again)
    here = [e for e in launched if e["seq"] > moved["seq"]]
    assert all(e.get("resumes") for e in here) and len(here) == len(runs), here
    for e in here:
        rid, follower = e["resumes"], e["run"]
        step = next(v.step for v in state.run(rid).verified if v.ok and v.path == e["resume_from"])
        assert step >= floor[rid], (fault, rid, step, floor)
        logged = steps_logged(new, follower)
        assert logged[0] == step + 1 and logged[-1] > step + 1, (logged[:3], step)
        out = (new / ".itera/runs" / follower / "stdout.log").read_text()
        assert f"resumed from step {step}\n" in out, out[:500]
