"""The control room's keys on a real engine, a tiny real campaign, a fake clock and NVML.

The runs and the wrap-up's helpers are the fakes' (tests/fakeprocs.py,
tests/fakewrapup.py) where the keys' words and the ledger are the subject; the
tests of a real process (a real SDK checkpoint verified afresh, a run that
outlives the room) start real ones and are marked slow.

Each test opens the app at 80x24 (the tmux pane it must be readable in) and
presses what a person would press; assertions read the ledger (what the engine
did) and the panels (what the person sees).
"""

from __future__ import annotations

import os

import psutil
import pytest
from textual.widgets import Input, OptionList

from fakeprocs import SelfPlayingProcesses
from fakewrapup import FakeWrapup
from test_app_support import (PILOT, FakeClock, actions_done, campaign, events_of, fake_probes,
                              kill_runs, line_with, run, script_cmd, shown, wait_for)
from tui.app.app import ControlRoom
from tui.app.screens import (ConfirmScreen, DecisionScreen, DoneScreen, DropScreen,
                             HelpScreen, StopScreen, WrapupScreen)
from tui.campaign import load_plan
from tui.engine import Engine
from tui.session import CampaignSession

SLOW = ["--steps", "100000", "--sleep", "0.05"]


@pytest.fixture
def room(tmp_path):
    """Build (app, engine, campaign path) on a fresh campaign; clean up the runs after."""
    sessions = []

    def make(spec, pilot: str = "", extra: str = "", command=None, real: bool = False, **kw):
        """`real`: the box's processes (a slow test); the fakes' otherwise."""
        path = campaign(tmp_path, spec, pilot=pilot, extra=extra, command=command)
        plan = load_plan(path)
        clock = FakeClock()
        engine = Engine(plan, clock=clock, poll_interval=0.05,
                        processes=None if real else SelfPlayingProcesses())
        session = CampaignSession(plan, engine, fake_probes(plan), clock, poll_interval=0.05,
                                  sample_interval=0.2,
                                  wrapup_helpers=None if real else FakeWrapup()).open()
        app = ControlRoom(plan, session, clock, tick_interval=0.1, refresh_interval=0.2, **kw)
        sessions.append(session)
        notices = app.notices = []
        original = app.notify

        def notify(message, *a, **k):
            notices.append(str(message))
            return original(message, *a, **k)

        app.notify = notify
        return app, engine, path

    yield make
    for session in sessions:
        session.wait_wrapup(60)  # no wrap-up thread outlives its test
        session.close()
        if session.engine.processes.__class__ is not SelfPlayingProcesses:
            kill_runs(session.engine)  # the real runs' groups; a fake run has no process


def running_row(app):
    row = app.selected_row()
    return row if row is not None and row.alive else None


@pytest.mark.slow  # a real SDK checkpoint, verified by the real verifier process
def test_checkpoint_key_checkpoints_the_selected_run_and_shows_the_ack(room):
    async def scenario():
        app, engine, path = room([("control", "mandatory", SLOW)],
                                 command=lambda a: script_cmd("ckpt_printer.py", *a), real=True)
        async with app.run_test(size=(80, 24)) as pilot:
            # the SDK's first record says the run can answer a request (metrics.jsonl)
            row = await wait_for(pilot, lambda: (running_row(app) or None) and
                                 running_row(app).step is not None and running_row(app),
                                 timeout=60, what="a running run with a first record")
            await pilot.press("c")
            requested = await wait_for(pilot, lambda: events_of(path, "checkpoint_requested"))
            assert requested[0]["run"] == row.run_id and requested[0]["by"] == "user"
            await wait_for(pilot, lambda: "checkpoint written by" in app.events_panel.plain(),
                           timeout=60, what="the acknowledgement in the events log")
            await wait_for(pilot, lambda: events_of(path, "checkpoint_verified"), timeout=60,
                           what="the verification verdict")
            verdict = events_of(path, "checkpoint_verified")[0]
            assert verdict["ok"] is True, verdict  # a real SDK checkpoint, loaded afresh
            assert any("checkpoint requested" in n for n in app.notices)
            # the ledger holds the verdict a moment before the room's pump brings it in
            await wait_for(pilot, lambda: any(f"checkpoint of {row.label} verified" in n
                                              for n in app.notices),
                           timeout=30, what="the verdict's notice in the room")
            await wait_for(pilot, lambda: app.selected_row().checkpoint.endswith("✓"),
                           what="the verified mark in the runs table")

    run(scenario())


def test_checkpoint_key_refuses_a_run_that_has_no_way_to_checkpoint(room):
    async def scenario():
        # printer.py only prints (read through [metrics]): no SDK, no callback, no watch
        app, engine, path = room([("control", "mandatory", SLOW)])
        async with app.run_test(size=(80, 24)) as pilot:
            row = await wait_for(pilot, lambda: running_row(app) and running_row(app).step
                                 and running_row(app), what="a printing run")
            await pilot.press("c")
            await wait_for(pilot, lambda: any("cannot checkpoint on request" in n
                                              for n in app.notices), what="the refusal")
            why = next(n for n in app.notices if "cannot checkpoint" in n)
            assert "[checkpoint] watch" in why and "metrics.jsonl" in why
            await actions_done(app)  # every action the key started is over
            assert not events_of(path, "checkpoint_requested")  # nothing pretended
            assert "cannot checkpoint" in app.events_panel.plain()  # kept in the log too
            assert row.run_id not in app.keys.awaiting_checkpoint

    run(scenario())


def test_stop_key_confirms_with_a_reason_then_stops_the_run(room):
    async def scenario():
        app, engine, path = room([("control", "mandatory", SLOW), ("b", "useful", SLOW)])
        async with app.run_test(size=(80, 24)) as pilot:
            row = await wait_for(pilot, lambda: running_row(app))
            assert row.target == "control"
            await pilot.press("s")  # the control is mandatory: first, what is lost
            assert isinstance(app.screen, ConfirmScreen)
            said = str(app.screen.query(".dialog-body").first().render())
            assert "the conclusion compares every variant with it" in said
            assert "inconclusive" in said
            await pilot.press("n")  # not stopped: the confirmation closes, no reason asked
            await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen),
                           what="the confirmation closed by n")
            assert not isinstance(app.screen, StopScreen)
            await pilot.press("s", "y")
            assert isinstance(app.screen, StopScreen)
            await pilot.press("escape")  # cancel: nothing happens
            await actions_done(app)  # an action it started would be over now
            assert not events_of(path, "run_stop_requested")
            await pilot.press("s", "y")
            app.screen.query_one(Input).value = "loss plateaued"
            await pilot.press("enter")
            stop = await wait_for(pilot, lambda: events_of(path, "run_stop_requested"))
            assert stop[0]["run"] == row.run_id and stop[0]["by"] == "user"
            assert stop[0]["reason"] == "loss plateaued"
            assert len(events_of(path, "run_stop_requested")) == 1  # the cancel asked nothing
            await wait_for(pilot, lambda: events_of(path, "run_exited"))
            await wait_for(pilot, lambda: "✕ user" in app.runs_panel.plain())
            assert app.selected_row().key == row.key  # the selection stayed on its row
            await wait_for(pilot, lambda: any(r.target == "b" and r.alive for r in app.rows),
                           what="b running next")
            await pilot.press("down")  # b is optional, but the last challenger: it warns too
            assert app.selected_row().target == "b"
            await pilot.press("s")
            assert isinstance(app.screen, ConfirmScreen)
            said = str(app.screen.query(".dialog-body").first().render())
            assert "b is the last challenger" in said and "inconclusive" in said
            await pilot.press("y")
            assert isinstance(app.screen, StopScreen)
            await pilot.press("escape")
            assert "loss plateaued" in app.events_panel.plain()  # the reason, not only the rule

    run(scenario())


def test_pause_key_pauses_and_resumes_the_queue(room):
    async def scenario():
        app, engine, path = room([("control", "mandatory", SLOW)])
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.room is not None)
            await pilot.press("p")
            await wait_for(pilot, lambda: events_of(path, "queue_paused"))
            await wait_for(pilot, lambda: "PAUSED" in app.header_panel.plain())
            await pilot.press("p")
            await wait_for(pilot, lambda: events_of(path, "queue_resumed"))
            await wait_for(pilot, lambda: "PAUSED" not in app.header_panel.plain())

    run(scenario())


def test_drop_key_refuses_a_mandatory_variant_and_drops_an_optional_one(room):
    async def scenario():
        app, engine, path = room([("control", "mandatory", SLOW), ("b", "useful", SLOW)])
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: running_row(app))
            await pilot.press("d")
            assert isinstance(app.screen, DropScreen)
            options = app.screen.query_one(OptionList)
            assert options.highlighted == 1  # the picker starts on the first optional variant
            assert "mandatory: the conclusion needs it" in str(options.get_option_at_index(0)
                                                               .prompt)
            options.highlighted = 0  # control (mandatory)
            await pilot.press("enter")
            await wait_for(pilot, lambda: any("cannot drop 'control': it is mandatory" in n
                                              for n in app.notices), what="the refusal")
            assert not events_of(path, "variant_dropped")
            picker = await wait_for(pilot, lambda: isinstance(app.screen, DropScreen)
                                    and app.screen.query("#drop-refused") and app.screen,
                                    what="the picker, open again with the refusal")
            assert "cannot drop 'control': it is mandatory" in picker.note
            app.screen.query_one(OptionList).highlighted = 1  # b (useful)
            await pilot.press("enter")
            assert isinstance(app.screen, ConfirmScreen)
            said = str(app.screen.query(".dialog-body").first().render())
            assert "b is the last challenger" in said  # the question would stay open
            assert "b will not run. The decision" in said  # b is queued: no run stopped
            await pilot.press("y")
            dropped = await wait_for(pilot, lambda: events_of(path, "variant_dropped"))
            assert [e["variant"] for e in dropped] == ["b"]
            await wait_for(pilot, lambda: "dropped" in app.runs_panel.plain())
            assert engine.state.dropped == {"b"}

    run(scenario())


def test_wrapup_key_confirms_then_shows_progress_to_the_end(room):
    async def scenario():
        app, engine, path = room([("control", "mandatory", SLOW)])
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: running_row(app))
            await pilot.press("w")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("n")
            await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen),
                           what="the confirmation answered")
            await actions_done(app)
            assert not isinstance(app.screen, WrapupScreen)
            await pilot.press("w", "y")
            # the progress screen (the ending may already cover it: a tiny bundle is quick)
            assert isinstance(app.overlays.wrapup_screen, WrapupScreen)
            assert app.overlays.wrapup_screen in app.screen_stack
            await wait_for(pilot, lambda: app.room.wrapup.ok is not None, timeout=90,
                           what="the wrap-up to end")
            wrap = app.room.wrapup
            assert wrap.ok is True and wrap.text.startswith("bundle verified"), wrap
            # the bundle verified: the ending opens over the finished wrap-up screen
            done = await wait_for(pilot, lambda: isinstance(app.screen, DoneScreen)
                                  and app.screen, what="the done screen")
            said = done.text()
            assert said.startswith("The campaign is over: the bundle is verified")
            assert "inconclusive" in said  # the only run was stopped by the wrap-up
            assert f":{path.parent.resolve()}/outputs/bundle/" in said  # the real folder
            assert "window ends in" in said and "the box can be released" in said
            header = app.header_panel.plain()
            assert "INCONCLUSIVE" in header and "ANSWERED" not in header  # as the ending says
            await pilot.press("escape")
            wrapup = app.screen
            assert isinstance(wrapup, WrapupScreen) and wrapup.status == wrap.text
            assert str(wrapup.query_one("#wrapup-keys").render()) == "esc close"  # it is over
            await pilot.press("escape")
            footer_keys = {b.binding.key for b in app.active_bindings.values()
                           if app.check_action(b.binding.action, ()) is not False}
            assert not {"c", "d", "w", "s", "p", "x"} & footer_keys, footer_keys
            assert {"e", "q", "enter", "z"} <= footer_keys
            assert events_of(path, "wrapup_started")
            done = events_of(path, "wrapup_done")
            assert done and done[0]["verified"] is True
            stops = events_of(path, "run_stop_requested")
            assert stops and stops[0]["by"] == "wrapup"  # stopped before the bundle was built
            assert not engine.state.running
            await pilot.press("e")  # the ending again: q there closes the room, as anywhere
            await wait_for(pilot, lambda: isinstance(app.screen, DoneScreen), what="the ending")
            await pilot.press("q")
            await wait_for(pilot, lambda: app.return_code is not None, what="q to close it")
        assert app.return_code == 0

    run(scenario())


@pytest.mark.slow  # a real run process outlives the room
def test_quit_leaves_the_run_process_alive(room):
    async def scenario():
        app, engine, path = room([("control", "mandatory", SLOW)], real=True)
        async with app.run_test(size=(80, 24)) as pilot:
            row = await wait_for(pilot, lambda: running_row(app))
            await pilot.press("q")
        assert app.return_code == 0
        pid = engine.state.run(row.run_id).pid
        proc = psutil.Process(pid)
        assert proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
        os.kill(pid, 0)
        assert not events_of(path, "run_stop_requested")

    run(scenario())


def test_decision_modal_appears_after_the_pilot_and_continue_launches_runs(room):
    async def scenario():
        app, engine, path = room([("control", "mandatory", SLOW), ("b", "useful", SLOW)],
                                 pilot=PILOT)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen)
                           and app.screen.query("#pilot-figures"), what="the decision modal")
            figures = str(app.screen.query_one("#pilot-figures").render())
            assert "control" in figures and "b" in figures and "acc" in figures
            assert "DECISION" in app.header_panel.plain().upper()
            # the newcomer's way: esc to read the events, x to reopen, c to continue
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, DecisionScreen))
            await pilot.press("x")
            await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen))
            await pilot.press("c")
            taken = await wait_for(pilot, lambda: events_of(path, "decision_taken"))
            assert taken[0]["decision"] == "continue" and taken[0]["by"] == "user"
            await wait_for(pilot, lambda: [e for e in events_of(path, "run_launched")
                                           if e["kind"] == "run"], what="a full run")
            assert not isinstance(app.screen, DecisionScreen)
            # x concerned no row: the selection follows the live training to a full run
            # (the walk of round 6 found it left on a finished pilot, its chart frozen)
            await wait_for(pilot, lambda: any(r.key == app.selected and r.kind == "run"
                                              for r in app.rows), what="the selection on a full run")

    run(scenario())


def test_decision_drop_of_a_mandatory_variant_is_refused_then_drop_b(room):
    async def scenario():
        app, engine, path = room([("control", "mandatory", SLOW), ("b", "useful", SLOW)],
                                 pilot=PILOT)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen))
            await pilot.press("d")
            app.screen.query_one(OptionList).highlighted = 0
            await pilot.press("enter")
            await wait_for(pilot, lambda: any("it is mandatory" in n for n in app.notices))
            assert not events_of(path, "decision_taken")
            await wait_for(pilot, lambda: isinstance(app.screen, DropScreen)
                           and app.screen.note, what="the picker again, with the refusal")
            app.screen.query_one(OptionList).highlighted = 1
            await pilot.press("enter", "y")
            taken = await wait_for(pilot, lambda: events_of(path, "decision_taken"))
            assert taken[0]["decision"] == "drop" and taken[0]["drop"] == ["b"]

    run(scenario())


def test_decision_suggests_dropping_a_variant_whose_pilot_a_rule_stopped(room):
    async def scenario():
        hot = ["--steps", "400", "--nan-at", "2", "--sleep", "0.02"]
        app, engine, path = room([("control", "mandatory", SLOW), ("b", "useful", SLOW),
                                  ("hot", "exploratory", hot)], pilot=PILOT,
                                 extra='[[stop]]\nrule = "non_finite"\nmetrics = ["loss"]\n')
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen)
                           and app.screen.query("#suggested"), timeout=40,
                           what="the decision modal with a suggestion")
            said = str(app.screen.query_one("#suggested").render())
            assert "hot (pilot stopped by non_finite nan)" in said
            figures = str(app.screen.query_one("#pilot-figures").render())
            hot_line = next(line for line in figures.splitlines() if line.startswith("hot"))
            assert "✕ non_finite nan" in hot_line and " 2 " in hot_line  # the rule's step
            await pilot.press("d")
            picker = app.screen
            assert isinstance(picker, DropScreen) and picker.marked == {"hot"}
            assert picker.options.highlighted == 1  # the first optional variant: b
            await pilot.press("space")  # b marked too, then unmarked: a written mark
            assert picker.marked == {"hot", "b"}
            assert str(picker.options.get_option_at_index(1).prompt).startswith("[x] b")
            await pilot.press("space")
            assert picker.marked == {"hot"}
            await pilot.press("enter")
            assert isinstance(app.screen, ConfirmScreen)
            said = " ".join(str(app.screen.query(".dialog-body").first().render()).split())
            assert "hot will not run." in said  # its pilot ended already: nothing
            assert "running now" not in said, said   # running is stopped by the drop
            await pilot.press("y")
            taken = await wait_for(pilot, lambda: events_of(path, "decision_taken"))
            assert taken[0]["decision"] == "drop" and taken[0]["drop"] == ["hot"]

    run(scenario())


def test_decision_shows_the_control_pilots_crash_and_continue_warns(room):
    async def scenario():
        app, engine, path = room([("control", "mandatory", ["--bogus-flag"]),
                                  ("b", "useful", SLOW)], pilot=PILOT)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen)
                           and app.screen.query("#suggested"), timeout=40,
                           what="the decision modal with the crash")
            said = str(app.screen.query_one("#suggested").render())
            assert "control: failed (exit 2): " in said and "--bogus-flag" in said
            assert "⚠ continue: the control's pilot failed" in said
            figures = str(app.screen.query_one("#pilot-figures").render())
            assert "✕ failed" in next(line for line in figures.splitlines()
                                      if line.startswith("control"))
            await pilot.press("escape")

    run(scenario())


def test_stop_rule_notifies_rings_and_marks_the_row(room):
    async def scenario():
        app, engine, path = room([("control", "mandatory", ["--steps", "400", "--nan-at", "5",
                                                            "--sleep", "0.02"])],
                                 extra='[[stop]]\nrule = "non_finite"\nmetrics = ["loss"]\n',
                                 auto_wrapup=False)
        bells = []
        app.bell = lambda: bells.append(1)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: events_of(path, "stop_rule_fired"))
            await wait_for(pilot, lambda: bells, what="the bell")
            assert any("non_finite" in n for n in app.notices)
            await wait_for(pilot, lambda: "✕ non_finite nan" in app.runs_panel.plain())
            assert "STOP" in app.events_panel.plain()

    run(scenario())


def test_help_screen_lists_every_key(room):
    async def scenario():
        app, engine, path = room([("control", "mandatory", SLOW)])
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            text = app.screen.text()
            for key, word in (("c", "checkpoint"), ("d", "drop"), ("w", "wrap up"), ("s", "stop"),
                              ("p", "pause"), ("q", "quit"), ("?", "help")):
                assert any(line.split()[0] == key and word in line.lower()
                           for line in text.splitlines() if line.strip()), key
            for mark, word in (("off", "no gpu"), ("ckpt", "? written and being verified"),
                               ("┊ ▲", "now"), ("┃", "window"), ("▒ █ ░", "planned"),
                               ("◆", "notice")):  # every symbol on screen, explained
                assert any(line.startswith(mark + " ") and word in line.lower()
                           for line in text.splitlines()), mark
            await pilot.press("end")  # at 80x24 it scrolls: its last lines are reachable
            lines = await shown(pilot, app, "┃ window end; lanes are lot:index")
            line_with(lines, "┃ window end; lanes are lot:index")
            line_with(lines, "esc close")
            await pilot.press("escape")
            assert not isinstance(app.screen, HelpScreen)

    run(scenario())


def test_a_drop_names_the_live_runs_it_stops_and_only_those():
    """The drop's confirmation said "a run of it now is stopped" of a variant whose pilot a
    rule had already stopped: it names the runs alive now, and says nothing when none is."""
    from types import SimpleNamespace

    from tui.app.keys import live_runs_stopped

    def run(target, kind, alive, attempt=1):
        return SimpleNamespace(target=target, kind=kind, alive=alive, attempt=attempt)

    room = SimpleNamespace(state=SimpleNamespace(runs=[
        run("hot", "pilot", False), run("b", "run", True, 2), run("c", "pilot", True),
        run("control", "run", True)]))
    assert live_runs_stopped(room, ["hot"]) == ""
    assert live_runs_stopped(room, ["b"]) == "; b·run#2, running now, is stopped"
    assert live_runs_stopped(room, ["b", "c", "hot"]) == \
        "; b·run#2, c·pilot, running now, are stopped"
    assert live_runs_stopped(None, ["b"]) == ""
