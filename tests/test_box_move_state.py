"""A box going away, as the replayed state, the scheduler and the budget see it (no
process): a run the shutdown's SIGTERM ended is cut, not failed; one that finished
cleanly meanwhile is done; a move cuts what still ran, gives the new box's window, is
a second rental, and each cut run continues from the checkpoint fetched for it."""

from __future__ import annotations

from enginekit import printer_cmd, write_plan
from tui.engine.ledger.events import parse
from tui.campaign import load_plan
from tui.engine.conclusion.outcome import budget
from tui.engine.ledger.state import replay
from tui.engine.lost_work import cut_runs
from tui.engine.scheduler import next_intents

T = 1.7e9
VARIANTS = "".join(f"""
[[variant]]
id = "{vid}"
category = "{cat}"
command = {printer_cmd("--steps", "5")}
minutes = 1
""" for vid, cat in (("control", "mandatory"), ("b", "useful")))


def launched(seq, run, target, t=T + 1):
    return {"seq": seq, "t": t, "event": "run_launched", "run": run, "target": target,
            "kind": "run", "category": "mandatory", "attempt": 1, "config_hash": "h",
            "pid": 4242}


def checkpoint(seq, run, step, t):
    return [{"seq": seq, "t": t, "event": "checkpoint_acknowledged", "run": run,
             "path": f"checkpoints/step-{step:06d}.pt", "step": step},
            {"seq": seq + 1, "t": t + 1, "event": "checkpoint_verified", "run": run,
             "path": f"checkpoints/step-{step:06d}.pt", "ok": True, "step": step}]


def base():
    return [{"seq": 1, "t": T, "event": "campaign_started"},
            {"seq": 2, "t": T, "event": "window_started", "start": T, "end": T + 3600,
             "hours": 1.0},
            {"seq": 3, "t": T, "event": "engine_started", "pid": 10, "host": "box-a"},
            launched(4, "c1", "control"), launched(5, "b1", "b"),
            *checkpoint(6, "c1", 20, T + 60), *checkpoint(8, "b1", 30, T + 70)]


def test_a_run_the_shutdown_ended_is_cut_and_one_that_finished_is_done(tmp_path):
    events = base() + [
        {"seq": 10, "t": T + 100, "event": "box_going_down", "signal": "SIGTERM",
         "grace_s": 60.0, "runs": ["c1", "b1"], "host": "box-a"},
        {"seq": 11, "t": T + 101, "event": "run_exited", "run": "c1", "exit_code": 0,
         "signaled": True},
        {"seq": 12, "t": T + 101, "event": "run_exited", "run": "b1", "exit_code": 0}]
    state = replay(events)
    assert state.run("c1").state == "cut" and state.run("b1").state == "completed"
    assert "box went away" in state.run("c1").why_ended
    # without the announcement the same exit is an ordinary one (done)
    assert replay(base() + [dict(events[-2], seq=10)]).run("c1").state == "completed"
    plan = load_plan(write_plan(tmp_path, VARIANTS, gpus=2))
    (intent,) = next_intents(plan, state)  # the next engine continues it, from its save
    assert intent.target == "control" and intent.resumes.run == "c1"
    assert intent.resumes.checkpoint == "checkpoints/step-000020.pt"


def test_a_move_cuts_what_ran_gives_the_new_window_and_counts_a_second_rental(tmp_path):
    plan = load_plan(write_plan(tmp_path, VARIANTS, gpus=2))
    moved_t = T + 9000
    events = base() + [
        {"seq": 10, "t": moved_t, "event": "campaign_moved", "store": "s3://x/y",
         "from_host": "box-a", "host": "box-b", "cut": ["c1", "b1"], "last_t": T + 100,
         "window_hours": 24.0, "price_usd": 12.0,
         "checkpoints": {"c1": "checkpoints/step-000020.pt"}}]
    state = replay(events)
    assert [r.state for r in state.runs] == ["cut", "cut"]
    assert (state.window_start, state.window_end) == (moved_t, moved_t + 24 * 3600)
    intents = {i.target: i for i in next_intents(plan, state)}
    assert intents["control"].resumes.checkpoint == "checkpoints/step-000020.pt"
    # b's checkpoint did not reach the store: it starts over, and says why
    assert intents["b"].resumes.checkpoint is None
    assert "started over" in intents["b"].resumes.reason
    lost = {c.run: c.lost_s for c in cut_runs(state)}
    assert lost == {"c1": 40.0, "b1": 99.0}  # from the save it continues from (or launch)
    assert budget(plan, state, tmp_path / ".itera/runs").rental_usd == 1.0 + 12.0


def test_resume_refuses_while_the_old_engine_may_still_drive_the_campaign():
    from tui.service.resume import ALIVE_WITHIN_S, old_box_may_live

    events = [parse(e) for e in base()]  # as the store's ledger is read back
    last = max(e.t for e in events)
    said = old_box_may_live(events, now=last + 5)
    assert said and "box-a" in said and "--force" in said
    assert old_box_may_live(events, now=last + ALIVE_WITHIN_S + 1) is None  # long silent
    stopped = events + [parse({"seq": 20, "t": last, "event": "engine_stopped", "pid": 10})]
    assert old_box_may_live(stopped, now=last + 5) is None  # it said it stopped
    down = events + [parse({"seq": 20, "t": last, "event": "box_checkpointed", "saved": {},
                            "unsaved": []})]
    assert old_box_may_live(down, now=last + 5) is None  # it announced its end


def test_the_budget_names_both_lots_each_at_its_lot_price(tmp_path):
    """After a move the report's budget lists the plan's lot and the new box's, each at
    the price of the whole lot (a 3-day RTX 4090 lot is 47.14 USD), never a rate."""
    from tui.bundle.report import _budget, moves_section

    plan = load_plan(write_plan(tmp_path, VARIANTS, gpus=2))
    events = base() + [
        {"seq": 10, "t": T + 9000, "event": "campaign_moved", "store": "s3://x/y",
         "from_host": "box-a", "host": "box-b", "cut": ["c1", "b1"], "last_t": T + 100,
         "window_hours": 72.0, "price_usd": 47.14, "lot": "RTX 4090"}]
    state = replay([parse(e) for e in events])
    b = budget(plan, state, tmp_path / ".itera/runs")
    said = "\n".join(_budget(plan, b, state.moves)) + moves_section(state)
    lots = next(line for line in said.splitlines() if line.startswith("- Lots committed"))
    assert "48.14 USD" in lots and "lot1: cpu x2, 1 h, 1.00 USD" in lots, lots
    assert "RTX 4090 lot of 3 d for 47.14 USD" in lots, lots
    assert " h at " not in said and "RTX 4090 lot of 3 d for 47.14 USD" in moves_section(state)
