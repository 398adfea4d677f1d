"""The run screen, the ending, zoom, toasts and the selection, on a fixed campaign state.

A FrozenEngine replays a ledger the test writes (no processes), the clock is
fixed, and what a person sees is read off the drawn screen (`screen_lines`).
"""

from __future__ import annotations

import time

import pytest

from test_app_support import (T0, actions_done, line_with, run, screen_lines, settle, shown,
                              snapshot_events, snapshot_room, wait_for)
from tui.app.screens import DoneScreen, RunScreen
from tui.engine import replay


pytestmark = pytest.mark.usefixtures("utc")  # local times print as UTC


def test_enter_opens_the_run_with_its_stop_checkpoints_and_live_tails(tmp_path):
    app, engine, clock = snapshot_room(tmp_path)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app)
            await pilot.press("enter")  # control·run is selected
            screen = await wait_for(pilot, lambda: isinstance(app.screen, RunScreen)
                                    and "step 40" in app.screen.tail_text("stdout")
                                    and app.screen, what="the run screen's tails")
            lines = screen_lines(app)
            line_with(lines, "control·run · control-77aa88bb-1")
            line_with(lines, "command", "python train.py")
            line_with(lines, "state", "running", "step 17240 of 20000")
            line_with(lines, "val_acc 0.861 (last)", "best 0.866")  # one rule for figures
            line_with(lines, "✓ step 16800", "1.4 GB", "24 min ago", "verified")
            line_with(lines, "warning: tokenizers fork")  # stderr too
            # the file named is one a person in the campaign folder can open (issue 44, 8)
            (shown,) = [ln.split(" · ")[-1].strip(" │▊▎") for ln in lines
                        if "stdout (last lines" in ln]
            assert shown == ".itera/runs/control-77aa88bb-1/stdout.log"
            assert (app.plan.root / shown).is_file()
            stdout = app.plan.state_dir / "runs" / "control-77aa88bb-1" / "stdout.log"
            with open(stdout, "a") as f:  # the run goes on printing: the tail follows
                f.write("step 41 loss 0.0244\n")
            await wait_for(pilot, lambda: "step 41 loss 0.0244" in screen.tail_text("stdout"),
                           what="the new line")
            await pilot.press("escape")
            assert not isinstance(app.screen, RunScreen)
            await pilot.press("up", "enter")  # lora64·pilot: the full stop reason
            await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
            await wait_for(pilot, lambda: "threshold = 0.41 at step 320: val_acc=0.41 below 0.5 "
                           "at step 320 (bound from step 300)" in " ".join(
                               "\n".join(screen_lines(app)).split()), what="the stop reason")
            await pilot.press("escape", "down", "down", "down", "enter")
            assert not isinstance(app.screen, RunScreen)  # lora64·run has not started
            assert app.selected_row().label == "lora64·run"

    run(scenario())


def test_a_tail_reads_only_the_end_of_a_big_file(tmp_path):
    from tui.app.tails import read_tail

    path = tmp_path / "stdout.log"
    with open(path, "wb") as f:
        f.write(b"the first line\n" + b"x" * 2_000_000)  # 2 MB, one unterminated line
        f.write(b"\nepoch 1 \x1b[32mok\x1b[0m\n10%|#\r50%|#####\r100%|##########\n\xff bad\n")
    tail = read_tail(path, max_lines=1000, max_bytes=4096)
    # only the last 4 kB were read: the cut line before them is dropped, not shown in part
    assert tail.lines == ("epoch 1 ok", "100%|##########", "\ufffd bad")
    assert tail.size > 2_000_000
    assert read_tail(path, max_lines=2).lines == ("100%|##########", "\ufffd bad")
    assert read_tail(tmp_path / "absent.log").note == "no file yet"


def test_the_ending_at_80x24_verdict_budget_bundle_retrieval_and_the_window(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("SSH_CONNECTION", "198.51.100.9 50122 203.0.113.7 22")
    app, engine, clock = snapshot_room(tmp_path, ending="yes")
    import getpass
    user = getpass.getuser()

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DoneScreen),
                           what="the ending, by itself once the bundle is verified")
            lines = await shown(pilot, app, "answered yes: lora16 (val_acc 0.874 vs control 0.861)")
            line_with(lines, "195.00 USD per accepted deliverable")
            line_with(lines, "2 accepted, 390.00 USD incurred")
            line_with(lines, "outputs/bundle/ (verified)")
            command = (f"rsync -avP {user}@203.0.113.7:{tmp_path.resolve()}/outputs/bundle/ "
                       "./nli-adapters-bundle")  # the real user, box and folder
            assert app.screen.view.command == command
            if len(command) <= 78:  # on one line, never wrapped: it can be copied
                line_with(lines, command)
            line_with(lines, "figures", "see report.md")  # no manifest here
            line_with(lines, "window ends in 1 d 22 h: the box can be released")
            await pilot.press("escape")
            header = screen_lines(app)[:3]
            line_with(header, "✓ bundle verified", "window ends in 1 d 22 h")
            line_with(header, "ANSWERED YES", "195.00 USD per accepted deliverable")
            footer = screen_lines(app)[-1]
            for gone in ("Ckpt", "Drop", "Wrap up", "Stop", "Pause", "Decide"):
                assert gone not in footer, footer  # nothing is left to act on
            assert "e Ending" in footer and "q Quit" in footer
            await pilot.press("c", "s", "p")  # hidden keys do nothing
            await actions_done(app)  # an action they started would be over
            assert engine.actions == []
            await pilot.press("e")
            assert isinstance(app.screen, DoneScreen)

    run(scenario())


def test_the_fetch_command_from_ssh_connection_placeholders_only_where_unknown(tmp_path):
    from types import SimpleNamespace

    from tui.app.ending_view import Origin, retrieval_command

    plan = SimpleNamespace(root=tmp_path, campaign=SimpleNamespace(name="nli adapters"))
    origin = Origin.here(plan, {"SSH_CONNECTION": "198.51.100.9 50122 203.0.113.7 2222"})
    assert (origin.host, origin.port, origin.folder) == ("203.0.113.7", 2222,
                                                         str(tmp_path.resolve()))
    assert retrieval_command(plan, "outputs/bundle", Origin("bo", "203.0.113.7", 2222,
                                                            "/srv/my runs")) == (
        "rsync -avP -e 'ssh -p 2222' 'bo@203.0.113.7:/srv/my runs/outputs/bundle/' "
        "./nli-adapters-bundle")  # a space in the folder: quoted for the shell
    v6 = Origin.here(plan, {"SSH_CONNECTION": "2001:db8::9 50122 2001:db8::1 22"})
    assert (v6.host, v6.port) == ("[2001:db8::1]", None)
    assert Origin.here(plan, {}).host == "<box>"  # not over ssh: a placeholder


def test_y_on_the_ending_copies_the_command_with_osc_52(tmp_path, monkeypatch):
    import base64

    monkeypatch.setenv("SSH_CONNECTION", "198.51.100.9 50122 203.0.113.7 22")
    monkeypatch.setenv("TMUX", "/tmp/tmux-1000/default,1,0")
    app, engine, clock = snapshot_room(tmp_path, ending="yes")

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DoneScreen))
            written = []
            real_write = app._driver.write
            app._driver.write = lambda data: (written.append(data), real_write(data))[1]
            await pilot.press("y")
            command = app.screen.view.command
            sequence = "\x1b]52;c;" + base64.b64encode(command.encode()).decode() + "\a"
            # OSC 52: the clipboard of the person's terminal
            await wait_for(pilot, lambda: sequence in written, what="the OSC 52 sequence")
            await wait_for(pilot, lambda: "set -g set-clipboard on" in " ".join(
                " ".join(screen_lines(app)).split()), what="what tmux needs")
            said = " ".join(" ".join(screen_lines(app)).split())
            assert "set -g set-clipboard on" in said  # in tmux: what it needs
            assert "does not accept it" in said

    run(scenario())


def test_an_inconclusive_ending_says_why_and_the_undefined_parts(tmp_path):
    app, engine, clock = snapshot_room(tmp_path, ending="inconclusive")

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DoneScreen))
            # a challenger stopped by a person: never a firm no
            await wait_for(pilot, lambda: "inconclusive: lora16 stopped (stopped by hand from "
                           "the control room)" in " ".join("\n".join(screen_lines(app)).split()),
                           what="the inconclusive verdict")
            await pilot.press("escape")
            line_with(screen_lines(app)[:3], "INCONCLUSIVE")
            assert "verdict: inconclusive" in app.events_panel.plain()

    run(scenario())


def test_z_zooms_the_focused_panel_and_back(tmp_path):
    app, engine, clock = snapshot_room(tmp_path)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app)
            assert app.focused is app.runs_panel
            rows_before = app.runs_panel.region.height
            await pilot.press("z")
            await wait_for(pilot, lambda: app.runs_panel.region.height == 23, what="zoomed")
            assert app.runs_panel.region.width == 80
            assert app.chart_panel.region.height == 0 or not app.chart_panel.display \
                or app.chart_panel.region.area == 0
            line_with(screen_lines(app), "data_check", "✓ done")  # every row fits now
            await pilot.press("z")
            await wait_for(pilot, lambda: app.runs_panel.region.height == rows_before,
                           what="back from the zoom")
            await pilot.press("tab", "tab", "tab")  # timeline, runs, GPUs... to the chart
            await wait_for(pilot, lambda: app.focused is not None)
            while app.focused is not app.chart_panel:
                await pilot.press("tab")
            await pilot.press("z")
            await wait_for(pilot, lambda: app.chart_panel.region.height == 23, what="the chart zoomed")
            lines = screen_lines(app)
            assert sum("│" in line for line in lines) >= 18  # the plot takes the screen

    run(scenario())


def test_notices_are_marked_lines_of_the_events_log_never_over_a_panel(tmp_path):
    app, engine, clock = snapshot_room(tmp_path)

    async def scenario():
        async with app.run_test(size=(80, 24), notifications=True) as pilot:
            await settle(pilot, app)
            from textual.widgets._toast import Toast

            long = ("lora64·pilot: threshold = 0.41 — val_acc=0.41 below 0.5 at step 320 "
                    "(bound from step 300) " * 3).strip()
            app.notify(long, title="stop rule fired", severity="error", timeout=30)
            app.notify("checkpoint of control·run verified", title="checkpoint")
            await wait_for(pilot, lambda: app.events_panel.notices == [
                f"stop rule fired: {long}", "checkpoint of control·run verified"],
                what="both notices in the log")
            await pilot.pause()
            assert not list(app.screen.query(Toast))  # nothing floats over a panel
            lines = screen_lines(app)
            top = app.events_panel.region.y
            newest = lines[top + app.events_panel.region.height - 1]
            assert "◆" in newest and "checkpoint of control·run verified" in newest
            cut = next(line for line in lines if "stop rule fired" in line)
            assert cut.rstrip().endswith("…")  # cut, and it says so
            await pilot.press("question_mark")  # a dialog: the notice waits in the log
            app.notify("stop requested for control·run", title="stop")
            await wait_for(pilot, lambda: "stop requested for control·run"
                           in app.events_panel.plain(), what="the notice in the log")
            await pilot.pause()
            assert not list(app.screen.query(Toast))
            assert "stop: stop requested" not in app.events_panel.plain()  # not titled twice
            await pilot.press("escape")
            app.events_panel.focus()
            await pilot.press("z")  # the log zoomed: the long notice whole, wrapped
            await wait_for(pilot, lambda: long in " ".join(" ".join(screen_lines(app)).split()),
                           what="the long notice whole")

    run(scenario())


def test_the_selection_moves_only_on_a_key(tmp_path):
    app, engine, clock = snapshot_room(tmp_path)

    def advance(*events):
        engine.state = replay(snapshot_events(True) + list(events))
        clock.advance(60)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app)
            await pilot.press("down", "down")
            assert app.selected_row().label == "lora64·run"  # queued
            assert app.selected_row().run_id is None
            # the campaign moves on: control·run ends, lora64's full run starts
            ended = {"seq": 21, "t": T0 + 1, "event": "run_exited",
                     "run": "control-77aa88bb-1", "exit_code": 0}
            launched = {"seq": 22, "t": T0 + 2, "event": "run_launched",
                        "run": "lora64-13572468-1", "target": "lora64", "kind": "run",
                        "category": "exploratory", "attempt": 1, "config_hash": "13572468",
                        "config": {}, "pid": 424203, "pid_start": 1.0, "lanes": ["lot1:0"],
                        "devices": "0", "lot": "lot1", "max_steps": 20000}
            advance(ended, launched)
            await wait_for(pilot, lambda: any(r.key == "lora64-13572468-1" for r in app.rows),
                           what="the new row")
            # the queued row became the run: the selection follows it, not the live runs
            await wait_for(pilot, lambda: app.selected_row().run_id == "lora64-13572468-1",
                           what="the selection on the new run")
            await pilot.press("up", "up")
            assert app.selected_row().label == "control·run"
            advance(ended, launched, {"seq": 23, "t": T0 + 3, "event": "run_exited",
                                      "run": "lora16-99cc00dd-1", "exit_code": 0})
            await wait_for(pilot, lambda: app.room.state.events == 23, what="lora16 ends")
            await wait_for(pilot, lambda: not any(r.key == "lora16-99cc00dd-1" and r.alive
                                                  for r in app.rows), what="its row ended")
            assert app.selected_row().label == "control·run"  # no jump when a run ends

    run(scenario())


def test_the_room_opens_on_a_campaign_whose_box_went_away(tmp_path):
    """After `itera-tui resume`, the runs the old box left live are `cut`: the room drew
    each row with a style per state and had none for `cut` (KeyError, the room gone)."""
    app, engine, clock = snapshot_room(tmp_path)
    events = snapshot_events(True)
    moved = {"seq": max(e["seq"] for e in events) + 1, "t": T0 + 5, "event": "campaign_moved",
             "store": "file:///store/camp", "cut": [], "window_hours": 1.0, "price_usd": 1.0}
    engine.state = replay(events + [moved])
    cut = [r.id for r in engine.state.runs if r.state == "cut"]
    assert cut  # the live runs of the fixed campaign

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app)
            await wait_for(pilot, lambda: any(r.state == "cut" for r in app.rows),
                           what="the cut rows")
            await pilot.press("down")
            assert app.selected_row() is not None

    run(scenario())


def test_a_model_that_fails_is_reported_and_the_room_stays_up(tmp_path, monkeypatch):
    import tui.app.app as room_app

    app, engine, clock = snapshot_room(tmp_path)
    real = room_app.timeline_model
    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("a timeline that cannot be drawn")
        return real(*args, **kwargs)

    monkeypatch.setattr(room_app, "timeline_model", broken)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: "room update failed: ValueError: a timeline that "
                           "cannot be drawn" in app.events_panel.plain(), what="the report")
            engine.state = replay(snapshot_events(True)[:-1])  # something new to draw
            await wait_for(pilot, lambda: len(calls) > 2, what="a later snapshot drawn")
            await pilot.press("down")  # the keys still work
            assert app.selected_row() is not None

    run(scenario())


def test_the_first_frame_holds_the_runs_before_any_session_step(tmp_path):
    """The runs table is painted from the replayed ledger alone: a session whose every
    step blocks (a slow first read of the runs' files) does not keep the rows off the
    screen, and `on_first_paint` runs once that frame is drawn, not before."""
    import threading

    app, engine, clock = snapshot_room(tmp_path)
    release = threading.Event()
    real_step, steps = app.session.step, []

    def blocked_step(*args, **kwargs):
        steps.append(time.monotonic())
        release.wait(30)
        return real_step(*args, **kwargs)

    app.session.step = blocked_step
    painted = []
    app.on_first_paint = lambda: painted.append((len(app.rows), list(steps)))

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            try:
                await wait_for(pilot, lambda: painted, what="the first frame")
                assert painted[0][0] == len(app.rows) > 0
                assert painted[0][1] == []  # no step had begun when the frame was drawn
                lines = screen_lines(app)
                line_with(lines, "control·run")
                assert app.room.conclusion is None  # the runs' files are the step's to read
            finally:
                release.set()
            await wait_for(pilot, lambda: len(steps) >= 2, what="the pump's steps")

    run(scenario())
    assert len(painted) == 1


def test_a_failing_replay_is_said_and_the_pump_brings_the_room(tmp_path):
    app, engine, clock = snapshot_room(tmp_path)

    def broken():
        raise RuntimeError("ledger replay exploded")

    app.session.replayed = broken

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.rows, what="the rows from the pump's step")
            assert any("ledger replay exploded" in text
                       for text in app.events_panel.texts), app.events_panel.texts

    run(scenario())


def test_the_question_the_header_cuts_at_80x24_is_whole_in_the_help(tmp_path):
    """Issue 44, item 3: at 80x24 the header cuts a long question ("…by at lea…");
    docs/room.md says so and names the key that shows it whole: `?`, at the help's top."""
    app, engine, clock = snapshot_room(tmp_path)
    question = app.plan.campaign.question

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app)
            header = screen_lines(app)[0]
            assert question not in header and header.rstrip().endswith("…"), header
            await pilot.press("question_mark")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
            lines = await shown(pilot, app, "The question")
            at = [i for i, line in enumerate(lines) if "The question" in line]
            assert at and question in lines[at[0] + 2], lines  # under its title, whole

    run(scenario())
