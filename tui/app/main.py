"""`itera-tui [PATH]`: load the plan, open the engine, run the control room.

The engine is opened before the UI starts, so 'another itera-tui drives this
campaign' is a clear one-line error (exit 2 from the CLI), not a broken screen.
Quitting closes the engine and leaves the runs alone in their own sessions.
"""

from __future__ import annotations

import pathlib
import sys
import time


def run_app(path: pathlib.Path) -> int:
    from ..campaign import load_plan
    from ..engine import Engine
    from ..engine.headless import default_probes
    from .app import ControlRoom

    plan = load_plan(path)
    probes = default_probes(plan)
    engine = Engine(plan, clock=time.time, probes=probes)
    app = ControlRoom(plan, engine, probes, time.time)
    engine.open()  # EngineError (another itera-tui) surfaces before any screen
    try:
        app.run()
        wrapup = app.wrapup_thread
        if wrapup is not None and wrapup.is_alive():
            print("itera-tui: waiting for the wrap-up to finish (Ctrl+C leaves it unfinished; "
                  "`itera-tui wrapup` redoes it)…", file=sys.stderr, flush=True)
            wrapup.join()
            if app.wrapup_result is not None:
                print(f"itera-tui: {app.wrapup_result[1]}", file=sys.stderr)
    finally:
        app.detach()
        engine.close()
        probes.close()
    return int(app.return_code or 0)
