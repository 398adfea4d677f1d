"""The work a box's end cost, counted from the records (issue 40, item 3).

A script that ignores ITERA_RESUME (nanoGPT) cut at step 525 restarts at step 0
on the next box, whatever checkpoint it is offered: all 525 steps were done
again. Before, every view said the seconds between the offered checkpoint's
acknowledgement and the cut ("2 s of training lost"), and the report said
"continued from the start (no verified checkpoint)" although one was offered.
Built here from a constructed ledger (no process): the same figure and words in
`status --json`, `status`, the report, the room's run screen and the notice.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

from enginekit import control_only, printer_cmd, write_plan
from test_box_move_state import T, base, checkpoint, launched
from tui.campaign import load_plan
from tui.engine.ledger.events import parse
from tui.engine.ledger.state import replay
from tui.engine.lost_work import cut_runs
from tui.service.status import print_status

VARIANTS = control_only(printer_cmd("--steps", "600"))
CUT_T = T + 100  # the old box's last event
OFFERED = "checkpoints/step-000500.pt"


def progress(seq, run, step, t, first=None):
    return {"seq": seq, "t": t, "event": "run_progress", "run": run, "step": step,
            **({"first_step": first} if first is not None else {})}


def resumed(first_step: int | None) -> list[dict]:
    """c1 ran to step 525 (its checkpoint at 500 verified and fetched), its box died,
    and the new box's c2 was offered step 500; its records began at `first_step`."""
    events = [e for e in base() if e.get("run") != "b1" and e.get("target") != "b"]
    events = [dict(e, seq=i + 1) for i, e in enumerate(events)]
    n = len(events)
    events += [progress(n + 1, "c1", 0, T + 2, first=0),
               *checkpoint(n + 2, "c1", 500, T + 90), progress(n + 4, "c1", 525, CUT_T),
               {"seq": n + 5, "t": T + 9000, "event": "campaign_moved", "store": "s3://x/y",
                "from_host": "box-a", "host": "box-b", "cut": ["c1"], "last_t": CUT_T,
                "window_hours": 24.0, "price_usd": 12.0, "checkpoints": {"c1": OFFERED}},
               dict(launched(n + 6, "c2", "control", t=T + 9001), attempt=2, resumes="c1",
                    resume_from=OFFERED)]
    if first_step is not None:
        events.append(progress(n + 7, "c2", first_step, T + 9010, first=first_step))
    return events


def campaign(tmp_path, events) -> object:
    plan = load_plan(write_plan(tmp_path, VARIANTS))
    (tmp_path / ".itera").mkdir(exist_ok=True)
    (tmp_path / ".itera" / "ledger.jsonl").write_text(
        "".join(json.dumps(ev) + "\n" for ev in events))
    return plan


def test_a_continuation_that_ignored_its_checkpoint_lost_every_step_it_redid(tmp_path,
                                                                             capsys):
    plan = campaign(tmp_path, resumed(first_step=0))
    (cut,) = cut_runs(replay([parse(e) for e in resumed(first_step=0)]))
    assert (cut.lost_steps, cut.reached_step, cut.started_step) == (525, 525, 0)
    assert cut.lost_s == CUT_T - (T + 1)  # from its launch: all its training time
    assert cut.ignored_checkpoint and cut.checkpoint_step == 500
    said = cut.line()
    assert "525 steps" in said and "restarted from step 0" in said
    assert "verified checkpoint at step 500 was offered" in said, said

    assert print_status(plan.path, as_json=True) == 0
    (data,) = json.loads(capsys.readouterr().out)["cut"]
    assert (data["lost_steps"], data["lost_s"], data["text"]) == (525, cut.lost_s, said)
    assert print_status(plan.path) == 0
    assert f"cut: {said}" in capsys.readouterr().out

    from tui.bundle.report import moves_section

    assert said in moves_section(replay([parse(e) for e in resumed(first_step=0)]))


def test_a_continuation_that_resumed_as_offered_redid_only_what_followed_the_save():
    (cut,) = cut_runs(replay([parse(e) for e in resumed(first_step=501)]))
    assert (cut.lost_steps, cut.lost_s) == (24, CUT_T - (T + 90))
    assert not cut.ignored_checkpoint
    assert "24 steps" in cut.line() and "resumed at step 501" in cut.line()
    # before its first record: what it will redo if it resumes as offered
    (ahead,) = cut_runs(replay([parse(e) for e in resumed(first_step=None)]))
    assert ahead.lost_steps == 25 and not ahead.counted


def test_the_room_and_the_wrapup_notice_say_the_same_words(tmp_path):
    from tui.app.run_detail import run_detail
    from tui.notify.notices import Composer

    events = [parse(e) for e in resumed(first_step=0)]
    state = replay(events)
    said = cut_runs(state)[0].line()
    plan = campaign(tmp_path, resumed(first_step=0))
    room = SimpleNamespace(state=state, engine=SimpleNamespace(live={}), now=T + 9999)
    for run in ("c1", "c2"):  # the cut run's screen, and its continuation's
        assert ("cut", said) in run_detail(plan, room, run).facts

    class Snap:
        phase = "done"

    Snap.state = state
    notice = Composer(plan, lambda: Snap).compose(parse(
        {"seq": 99, "t": T + 9999, "event": "wrapup_done", "bundle": "outputs/bundle",
         "verified": True, "failures": 0, "bytes": 10}))
    assert said in notice.body


def test_the_engine_records_where_a_run_s_records_began_and_how_far_they_went(tmp_path):
    """The marks the count is made from: the first record's step at once, then the step
    at most every PROGRESS_EVERY_S while it moves, and once more as the run exits."""
    from tui.engine.ledger.events import RunLaunched, RunProgress
    from tui.engine.ledger.file import read_ledger
    from tui.engine.ledger.journal import Journal
    from tui.engine.runs.control import ControlFiles
    from tui.engine.watching.live import RunLive
    from tui.engine.rules import RuleSet
    from tui.engine.watching.watcher import PROGRESS_EVERY_S, RunWatcher

    live = RunLive("c1", tmp_path, RuleSet((), "control", "run"), (), "acc", "max", 0.0)
    live._ingest([{"step": s, "acc": 0.5} for s in (0, 1, 2, 3)], 1.0, False)
    assert (live.first_step, live.global_step) == (0, 3)

    journal = Journal(tmp_path / "ledger.jsonl", lambda: T)
    journal.open()
    journal.record(RunLaunched(run="c1", target="control", kind="run", category="mandatory",
                               attempt=1, config_hash="h"))
    watcher = RunWatcher(SimpleNamespace(grace_seconds=1.0, root=tmp_path), journal,
                         tmp_path / "runs", ControlFiles(tmp_path / "runs"),
                         checkpoints=None, verifier=None, monotonic=lambda: 0.0)
    for mono, step, final in ((0.0, 3, False), (10.0, 9, False), (PROGRESS_EVERY_S + 1, 40, False),
                              (PROGRESS_EVERY_S + 2, 40, False), (PROGRESS_EVERY_S + 3, 41, True)):
        live.global_step = step
        watcher._progress(journal.state.run("c1"), live, mono, final=final)
    marks = [(ev.step, ev.first_step) for ev in read_ledger(journal.path)
             if isinstance(ev, RunProgress)]
    assert marks == [(3, 0), (40, None), (41, None)]
    run = journal.state.run("c1")
    assert (run.first_step, run.reached_step) == (0, 41)


def test_the_continuation_names_the_step_of_a_checkpoint_verified_without_one():
    """nanoGPT's `ckpt.pt` names no step and its verification read none: the step it was
    acknowledged at is the step said (the ledger said "at step None")."""
    from tui.engine.scheduler import continuation

    events = [dict(e, step=None) if e["event"] == "checkpoint_verified" else e
              for e in resumed(first_step=None)[:-1]]  # up to the move, before the launch
    said = continuation(replay([parse(e) for e in events]), "control", "run")
    assert said.checkpoint == OFFERED
    assert "at step 500" in said.reason and "None" not in said.reason, said.reason


def _hf_live(run_dir):
    """A RunLive reading an HF Trainer's stdout (preset hf_trainer, disable_tqdm: no bar),
    its clock for the trainer_state.json rescans in the test's hands."""
    from tui.campaign.presets import build_spec
    from tui.engine.rules import RuleSet
    from tui.engine.watching.live import RunLive

    live = RunLive("c2", run_dir, RuleSet((), "control", "run"), build_spec("hf_trainer"),
                   "loss", "min", 0.0)
    clock = [0.0]
    live.feeds.epochs.monotonic = lambda: clock[0]
    return live, clock


def _hf_print(run_dir, steps, per_epoch=12):
    with (run_dir / "stdout.log").open("a") as out:
        for s in steps:  # transformers 5.x: values quoted, the epoch to 4 significant digits
            out.write(f"{{'loss': '2.5', 'grad_norm': '1.1', 'epoch': '{s / per_epoch:.4g}'}}\n")


def _hf_save(run_dir, step, per_epoch=12):
    folder = run_dir / "out" / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    history = [{"step": s, "epoch": s / per_epoch, "loss": 2.5} for s in range(1, step + 1)]
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": history,
                                                           "global_step": step}))


def test_an_hf_run_without_a_bar_began_at_its_first_dict_not_after_its_first_save(tmp_path):
    """HF with disable_tqdm prints its dicts with no step until a checkpoint's
    trainer_state.json gives the steps per epoch: the continuation resumed from
    checkpoint-180 began at step 181 (its first dict), not 201 (the first dict after its
    first save), and a run from scratch began at step 1, not 20 (issue 40, figure 1)."""
    for began, saved in ((181, 200), (1, 20)):
        run_dir = tmp_path / f"from-{began}"
        run_dir.mkdir()
        live, clock = _hf_live(run_dir)
        _hf_print(run_dir, range(began, saved + 1))
        live.poll(1.0)
        assert live.global_step is None  # no save yet: no dict can be dated
        _hf_save(run_dir, saved)
        clock[0] += 60.0  # past the trainer_state.json rescan
        _hf_print(run_dir, range(saved + 1, saved + 6))
        live.poll(2.0)
        assert (live.first_step, live.global_step) == (began, saved + 5)


def _died_at_180(exited_at: int | None) -> list[dict]:
    """c1 saved checkpoint-180 and reached 197; `exited_at` None: its box died without a
    word, so the ledger's last word of it is the checkpoint at 180 (its marks come every
    5 min); else the box announced its end and the engine saw c1 exit at that step."""
    ckpt = "checkpoints/step-000180.pt"
    events = [e for e in base() if e.get("run") != "b1" and e.get("target") != "b"]
    events = [dict(e, seq=i + 1) for i, e in enumerate(events)]
    n = len(events)
    events += [progress(n + 1, "c1", 1, T + 2, first=1), *checkpoint(n + 2, "c1", 180, T + 90)]
    if exited_at is not None:
        events += [{"seq": n + 4, "t": T + 95, "event": "box_going_down", "signal": "SIGTERM",
                    "grace_s": 60.0, "runs": ["c1"], "host": "box-a"},
                   progress(n + 5, "c1", exited_at, CUT_T),
                   {"seq": n + 6, "t": CUT_T, "event": "run_exited", "run": "c1",
                    "exit_code": -15, "signaled": True}]
    n = len(events)
    return events + [
        {"seq": n + 1, "t": T + 9000, "event": "campaign_moved", "store": "s3://x/y",
         "from_host": "box-a", "host": "box-b", "cut": ["c1"], "last_t": CUT_T,
         "window_hours": 24.0, "price_usd": 12.0, "checkpoints": {"c1": ckpt}},
        dict(launched(n + 2, "c2", "control", t=T + 9001), attempt=2, resumes="c1",
             resume_from=ckpt),
        progress(n + 3, "c2", 181, T + 9010, first=181)]


def test_a_box_that_died_without_a_word_leaves_a_floor_said_as_one():
    """The trial read "0 steps (0 s) of the 180 it had reached redone" for a run at step
    197 whose last word in the ledger was its checkpoint at 180: what is known is that it
    reached 180 at least, and at least the time since that save was done again. When the
    engine saw it exit (an announced end), its last mark is exact (issue 40, figure 2)."""
    (died,) = cut_runs(replay([parse(e) for e in _died_at_180(None)]))
    said = died.line()
    assert "0 steps" not in said and "of the 180 it had reached" not in said, said
    assert died.at_least and died.reached_step == 180 and died.started_step == 181
    assert died.lost_text().startswith("at least ") and died.lost_text() in said, said
    assert "its box died at step 180 or later" in said, said
    assert died.lost_s == CUT_T - (T + 90)  # since the save it resumed from, at least
    assert "resumed at step 181" in said

    (seen,) = cut_runs(replay([parse(e) for e in _died_at_180(197)]))
    assert not seen.at_least and seen.lost_steps == 16
    assert "16 steps" in seen.line() and "of the 197 it had reached" in seen.line()
    assert "at least" not in seen.line()


def test_the_new_box_raises_the_floor_to_the_records_stored_with_the_last_save(tmp_path):
    """The store keeps a run's records with each verified checkpoint, read a moment after
    the save: they may go past its last mark in the ledger. The engine that takes the move
    up counts them (a run_progress), so the floor is the newest step known anywhere."""
    from fakeprocs import FakeClock, FakeProcesses
    from tui.engine import Engine
    from tui.engine.moves import MoveRequest

    events = _died_at_180(None)
    moved_at = next(i for i, e in enumerate(events) if e["event"] == "campaign_moved")
    plan = campaign(tmp_path, events[:moved_at])  # the store's ledger: c1 live at 180
    runs = tmp_path / ".itera" / "runs" / "c1"
    runs.mkdir(parents=True)
    (runs / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "acc": 0.5}) + "\n" for s in range(1, 187)))
    MoveRequest("s3://x/y", 24.0, 12.0,
                checkpoints=(("c1", "checkpoints/step-000180.pt"),)).write(tmp_path / ".itera")
    clock = FakeClock(T + 9000)
    engine = Engine(plan, clock=clock.wall, monotonic=clock.mono, poll_interval=0.05,
                    processes=FakeProcesses(clock)).open()
    try:
        state = engine.state
    finally:
        engine.close()
    (cut,) = cut_runs(state)
    assert (cut.reached_step, cut.at_least) == (186, True), cut
    assert "its box died at step 186 or later" in cut.line(), cut.line()
