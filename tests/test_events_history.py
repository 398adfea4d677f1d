"""The whole events history scrolls back in the zoomed events log (issue 36, item 7).

A room reopened after a night away held the last ~22 lines and PageUp, Home and
↑ did nothing. Now, zoomed, they scroll; past the lines the engine handed over
at connect, older events page in from the ledger, back to its first event.
Also `itera-tui status` names engine restarts and who took each decision.
"""

from __future__ import annotations

import json

import pytest

from clikit import cli
from test_app_keys import SLOW, room, running_row  # noqa: F401 - room is a fixture
from test_app_support import run, wait_for
from tui.engine.decision.answer import CONTINUE
from tui.engine.ledger.events import EngineRestarted


def test_ledger_pages_read_backwards_bounded_by_the_page(tmp_path):
    from tui.engine.ledger.pages import events_before

    path = tmp_path / "ledger.jsonl"
    path.write_text("".join(json.dumps({"event": "warning", "seq": i, "t": i,
                                        "message": f"w{i}"}) + "\n" for i in range(3000))
                    + '{"torn')
    page = events_before(path, 2000, 300)
    assert [e["seq"] for e in page] == list(range(1700, 2000))
    assert [e["seq"] for e in events_before(path, 3, 300)] == [0, 1, 2]
    assert events_before(tmp_path / "none.jsonl", None, 10) == []


def test_home_pageup_and_up_scroll_the_zoomed_log_back_to_the_ledger_s_first_event(room):  # noqa: F811
    async def scenario():
        app, engine, path = room([("control", "mandatory", SLOW)])
        for i in range(700):  # a night of events: more than the room is handed at connect
            engine.warn(f"night event {i}")
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: running_row(app))
            log = app.events_panel
            await wait_for(pilot, lambda: "night event 699" in log.render().plain)
            assert "campaign started" not in log.plain()  # not handed over at connect
            log.focus()
            await pilot.press("z")
            assert log.has_class("zoomed")
            await pilot.press("up")
            assert log.back == 1 and "↓ 1 newer line" in log.render().plain
            await pilot.press("pageup")
            assert log.back > 10
            for _ in range(20):
                await pilot.press("home")
                if log.history_start and "campaign started" in log.render().plain:
                    break
                await pilot.pause(0.2)
            shown = log.render().plain
            assert "campaign started" in shown, shown
            assert "newer lines" in shown  # and how to get back
            await pilot.press("end")
            assert log.back == 0 and "newer line" not in log.render().plain

    run(scenario())


def test_status_names_engine_restarts_and_who_took_the_decision(tmp_path):
    from enginekit import write_plan
    from fakeprocs import drive_plan
    from test_engine_decisions import PILOT, three_variants
    from tui.campaign import load_plan
    from tui.engine import Engine

    path = write_plan(tmp_path, three_variants(), pilot=PILOT)
    drive_plan(path, decide=CONTINUE)  # `run --headless --decide continue`'s engine
    engine = Engine(load_plan(path), poll_interval=0.05).open()
    try:  # what the supervisor's new engine records after a kill -9 (service/daemon.py)
        engine.journal.record(EngineRestarted(pid=4242, reason="killed by SIGKILL",
                              restarts=1))
    finally:
        engine.close()
    out = cli("status", str(path), cwd=tmp_path).stdout
    assert "decision: continue (by `run --headless --decide`) at " in out, out
    assert "engine restarted at " in out and "(killed by SIGKILL; restart 1)" in out, out
