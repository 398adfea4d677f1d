"""`itera-tui [PATH]`: find or start the campaign's engine, open the room as its client.

The engine is its own process (`tui.service`), detached from any terminal: the
room connects to it (starting it first when none runs) and `q` closes the
room only; the campaign goes on by its rules, to its wrap-up. A plan that
cannot be driven is one clear line (exit 2) before any screen. With `--host`
the room follows a campaign on another box through the user's own ssh.

The cyclic garbage collector waits until the first frame is on the screen:
starting up (imports, the plan, the widgets) creates objects that live as long
as the process, and collecting them over and over cost the first paint about
a fifth of its time (`bench/room_idle_bench.py`). Once painted, one collection
runs and what survives it is frozen out of later collections, so a room open
for days never rescans its own startup.
"""

from __future__ import annotations

import gc
import pathlib
import sys
import time


FAREWELL = ("itera-tui: the engine (pid {pid}) goes on driving the campaign;\n"
            "  `itera-tui` reopens the room,\n"
            "  `itera-tui engine stop` stops the engine (the runs are left alone)")
# three lines under 80 columns: a terminal never breaks a command in the middle  # every command it names works then (tests/test_suggested_commands.py)
FAREWELL_FINISHED = ("itera-tui: the campaign is finished; its engine (pid {pid}) only\n"
                     "  answers, and goes by itself {idle} after the last room closes;\n"
                     "  `itera-tui` reopens the room, `itera-tui engine stop` ends it now")


def farewell_of(driving: str, finished: str, room, pid) -> str:
    """The words `q` leaves on the terminal: the campaign driven on, or, once the room's
    last view says it is over, a finished campaign whose engine only answers."""
    from ..service.lifetime import IDLE_EXIT_S
    from .keys import campaign_over

    return (finished if campaign_over(room) else driving).format(
        pid=pid, idle=f"{IDLE_EXIT_S / 60:g} min")


def gc_after_first_paint() -> None:
    """Collect once, freeze the survivors (they live as long as the room), resume."""
    gc.collect()
    gc.freeze()
    gc.enable()


def run_app(path: pathlib.Path) -> int:
    gc.disable()  # until the first frame: see the module docstring
    try:
        return _run(path)
    finally:
        gc.enable()


def _run(path: pathlib.Path) -> int:
    from ..engine.errors import EngineError
    from ..service.client import EngineUnavailable
    from ..service.starter import connect
    from ..session import load_campaign

    plan = load_campaign(path)
    try:
        client = connect(plan, start=True, name="room")
    except EngineUnavailable as exc:
        raise EngineError(str(exc)) from None
    from ..service.fleet import open_fleet

    client = open_fleet(plan, client)  # a campaign over several boxes: every box's engine
    return _room(plan, client, FAREWELL, FAREWELL_FINISHED)


def _room(plan, client, farewell: str, finished: str) -> int:
    from .app import ControlRoom

    app = ControlRoom(plan, client, time.time, auto_wrapup=False,
                      on_first_paint=gc_after_first_paint)
    try:
        app.run()
    finally:
        app.pump.stop()
        client.close()
    print(farewell_of(farewell, finished, app.room, client.engine_pid), file=sys.stderr)
    return int(app.return_code or 0)


def run_remote_app(host: str) -> int:
    gc.disable()
    try:
        return _run_remote(host)
    finally:
        gc.enable()


def _run_remote(host: str) -> int:
    from ..engine.errors import EngineError
    from ..service.client import EngineUnavailable
    from ..service.remote import remote_client

    try:
        client = remote_client(host)
    except EngineUnavailable as exc:
        raise EngineError(str(exc)) from None
    where = host.split(":")[0]
    return _room(client.plan, client, f"itera-tui: the engine on {where} goes on driving the "
                 "campaign; this room only followed it", f"itera-tui: the campaign on {where} "
                 "is finished; this room only followed it")
