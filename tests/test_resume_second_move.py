"""A campaign moved twice (issue 40, figures 3 and 4), from constructed ledgers (no
process, no store): box A cut c1 after its checkpoint at 180 verified and reached the
store; box B continued it as c2 and died too, before any checkpoint of c2 verified.

3. On box C the newest verified checkpoint of the task is still c1's at 180: the plan
   offered none ("started over") because it looked at c2's alone.
4. `resume` listed c1 among the runs it would continue, although box B had already
   continued it (by c2): only c2 needs continuing, and c1 is said to be continued.
"""

from __future__ import annotations

from test_box_move_state import T, base, checkpoint, launched
from test_lost_work import progress
from tui.engine.ledger.events import parse
from tui.engine.ledger.state import replay
from tui.engine.lost_work import cut_runs
from tui.engine.scheduler import continuation

CKPT = "checkpoints/step-000180.pt"
B_DIED = T + 9300  # box B's last event in the store's ledger


def moved(seq, host, last_t, checkpoints, t):
    return {"seq": seq, "t": t, "event": "campaign_moved", "store": "s3://x/y",
            "from_host": "box-?", "host": host, "cut": [], "last_t": last_t,
            "window_hours": 24.0, "price_usd": 12.0, "checkpoints": checkpoints}


def on_box_b() -> list[dict]:
    """The store's ledger as box C reads it: c1 cut on A, c2 running on B when B died."""
    events = [e for e in base() if e.get("run") != "b1" and e.get("target") != "b"]
    events = [dict(e, seq=i + 1) for i, e in enumerate(events)]
    n = len(events)
    return events + [
        progress(n + 1, "c1", 1, T + 2, first=1), *checkpoint(n + 2, "c1", 180, T + 90),
        moved(n + 4, "box-b", T + 100, {"c1": CKPT}, T + 9000),
        dict(launched(n + 5, "c2", "control", t=T + 9001), attempt=2, resumes="c1",
             resume_from=CKPT),
        progress(n + 6, "c2", 181, T + 9010, first=181),
        {"seq": n + 7, "t": T + 9200, "event": "checkpoint_acknowledged", "run": "c2",
         "path": "checkpoints/step-000200.pt", "step": 200}]  # never verified: B died


def on_box_c() -> list[dict]:
    """Box C's engine records the second move (c1's checkpoint fetched, none of c2's)."""
    events = on_box_b()
    return events + [moved(len(events) + 1, "box-c", B_DIED, {"c1": CKPT}, T + 20000)]


def test_the_second_move_continues_from_the_newest_verified_checkpoint_of_any_attempt():
    state = replay([parse(e) for e in on_box_c()])
    assert [r.state for r in state.runs] == ["cut", "cut"]
    said = continuation(state, "control", "run")
    assert said.run == "c2" and said.checkpoint == CKPT, said  # not "started over"
    assert said.owner == "c1" and "at step 180" in said.reason, said
    # before its continuation starts, every view says what it will be offered
    ahead = {c.run: c for c in cut_runs(state)}["c2"]
    assert ahead.checkpoint_step == 180 and ahead.offered_by == "c1", ahead.line()
    assert "c1's verified checkpoint at step 180" in ahead.line()

    # launched from it (the ledger names whose checkpoint it is), the work is counted
    events = on_box_c()
    events += [dict(launched(len(events) + 1, "c3", "control", t=T + 20001), attempt=3,
                    resumes="c2", resume_from=CKPT, resume_run="c1"),
               progress(len(events) + 2, "c3", 181, T + 20010, first=181)]
    state = replay([parse(e) for e in events])
    (c3,) = [r for r in state.runs if r.id == "c3"]
    assert (c3.resumes, c3.resume_from, c3.resume_run) == ("c2", CKPT, "c1")
    line = {c.run: c for c in cut_runs(state)}["c2"].line()
    assert "continued by c3, which resumed at step 181 from c1's verified checkpoint at " \
           "step 180" in line, line


def test_the_launch_hands_the_earlier_attempt_s_checkpoint_to_the_script(tmp_path):
    """ITERA_RESUME points into the owner's run directory (c1's), not c2's."""
    from types import SimpleNamespace

    from tui.engine.runs.launching import Launcher
    from tui.engine.scheduler import Intent

    state = replay([parse(e) for e in on_box_c()])
    intent = Intent("control", "run", "mandatory", ("python", "x.py"), 0, None,
                    resumes=continuation(state, "control", "run"))
    launcher = Launcher.__new__(Launcher)
    launcher.runs_dir = tmp_path / "runs"
    launcher.journal = SimpleNamespace(state=state)
    launcher.plan = SimpleNamespace(corpus=None, root=tmp_path, stops=())
    env = launcher._env("c3", tmp_path / "runs" / "c3", intent,
                        SimpleNamespace(devices=""))
    assert env["ITERA_RESUME"] == str(tmp_path / "runs" / "c1" / CKPT)


def test_resume_lists_only_the_runs_still_to_continue_and_who_continued_the_others(tmp_path):
    from tui.service.resume import Resumed, continuation_plan

    state = replay([parse(e) for e in on_box_b()])
    cut, owners, continued = continuation_plan(state, {"c1": CKPT})
    assert (cut, owners, continued) == ({"c2": CKPT}, {"c2": "c1"}, {"c1": "c2"})
    line = Resumed(tmp_path, "lot1", (), cut, 3, owners=owners, continued=continued).line()
    assert f"cut: c2 (from c1's {CKPT})" in line, line
    assert "c1 (from" not in line and "already continued on an earlier box: c1 (by c2)" in line
