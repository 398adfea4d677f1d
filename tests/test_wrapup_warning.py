"""`w` says when the wrap-up will leave the verdict inconclusive, as `s` does, and the
runs the wrap-up stopped are logged as stopped for it (issue 36, item 12).

The room at 80x24 on a real engine and a running control (fake runs and a fake
wrap-up: tests/fakeprocs.py, tests/fakewrapup.py): the confirm says the verdict
will be inconclusive; after the wrap-up the ledger's
`run_exited` says who asked it to stop, and the events line reads "stopped ...
for the wrap-up", not "exited ... with status 0".
"""

from __future__ import annotations

from types import SimpleNamespace


from test_app_keys import SLOW, room, running_row  # noqa: F401 - room is a fixture
from test_app_support import events_of, run, wait_for
from tui.app.screens import ConfirmScreen
from tui.engine.ledger.lines import describe


def _state(runs, dropped=(), decided=None):
    runs = [SimpleNamespace(target=t, kind="run", state=s) for t, s in runs]
    return SimpleNamespace(runs=runs, dropped=set(dropped), decided=decided,
                           runs_of=lambda target, kind=None: [r for r in runs
                                                              if r.target == target])


def test_the_wrapup_warning_names_what_makes_the_verdict_inconclusive():
    from tui.engine.conclusion.verdict import wrapup_warning

    plan = SimpleNamespace(campaign=SimpleNamespace(control="control"),
                           variants=[SimpleNamespace(id="control"), SimpleNamespace(id="wide")])
    said = wrapup_warning(plan, _state([("control", "running")]))
    assert "control's full run has not completed" in said and "inconclusive" in said
    said = wrapup_warning(plan, _state([("control", "completed"), ("wide", "running")]))
    assert "no challenger has a completed full run (wide" in said
    assert wrapup_warning(plan, _state([("control", "completed"), ("wide", "completed")])) \
        is None
    assert wrapup_warning(plan, _state([("control", "running")],
                                       decided=SimpleNamespace(decision="wrapup"))) is None


def test_a_run_the_wrapup_stopped_reads_stopped_for_it_not_exited_with_status_0():
    line = describe({"seq": 1, "event": "run_exited", "run": "control-1", "exit_code": 0,
                     "stopped_by": "wrapup", "t": 0})
    assert line == "stopped control-1 for the wrap-up (exit status 0)"
    assert describe({"seq": 1, "event": "run_exited", "run": "c", "exit_code": 0, "t": 0}) == \
        "exited c with status 0"


def test_w_warns_the_verdict_will_be_inconclusive_and_the_stop_is_logged_as_such(room):  # noqa: F811
    async def scenario():
        app, engine, path = room([("control", "mandatory", SLOW)])
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: running_row(app))
            await pilot.press("w")
            assert isinstance(app.screen, ConfirmScreen)
            said = str(app.screen.query(".dialog-body").first().render())
            assert "verdict will be inconclusive" in said, said
            await pilot.press("y")
            await wait_for(pilot, lambda: app.room.wrapup.ok is not None, timeout=90,
                           what="the wrap-up to end")
            exited = events_of(path, "run_exited")
            assert exited and exited[0].get("stopped_by") == "wrapup", exited
            assert "for the wrap-up" in describe(exited[0])

    run(scenario())
