"""`itera-tui [PATH]`: load the plan, open the session, run the control room.

The session is opened before the UI starts, so 'another itera-tui drives this
campaign' is a clear one-line error (exit 2 from the CLI), not a broken screen.
Quitting closes the session and leaves the runs alone in their own sessions;
a wrap-up still building its bundle is waited for, with a word on stderr.

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
    from ..session import CampaignSession, default_probes, load_campaign
    from .app import ControlRoom

    plan = load_campaign(path)
    session = CampaignSession(plan, probes=default_probes(plan), clock=time.time,
                              poll_interval=0.5)
    session.open()  # EngineError (another itera-tui) surfaces before any screen
    app = ControlRoom(plan, session, time.time, on_first_paint=gc_after_first_paint)
    try:
        app.run()
        if session.wrapup_running:
            print("itera-tui: waiting for the wrap-up to finish (Ctrl+C leaves it unfinished; "
                  "`itera-tui wrapup` redoes it)…", file=sys.stderr, flush=True)
            result = session.wait_wrapup()
            print(f"itera-tui: {result.text}", file=sys.stderr)
    finally:
        app.pump.stop()
        session.close()
    return int(app.return_code or 0)
