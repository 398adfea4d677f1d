"""A signal handler of the engine takes no lock.

The detached engine's SIGTERM (the box is going down) and SIGINT/SIGHUP (stop) ran
`Event.set` in their handler. A handler runs in the main thread between two
bytecodes, perhaps while that very thread holds the event's lock inside the loop's
`wait`; `set` then waits for a lock its own thread holds. Seen once in the README's
full run: the engine stopped writing at the SIGTERM and never ended
(`test_box_move`'s shutdown). Here the loop's side of it is played exactly: the
wake's lock is held, and the handler is called on the same thread.
"""

from __future__ import annotations

import signal
import threading

from enginekit import control_only, printer_cmd, write_plan
from tui.campaign import load_plan

VARIANTS = control_only(printer_cmd("--steps", "5"))


def _service(tmp_path):
    from tui.service.paths import socket_path
    from tui.service.server import EngineService
    from tui.session import CampaignSession

    plan = load_plan(write_plan(tmp_path, VARIANTS))
    session = CampaignSession(plan, clock=lambda: 1_800_000_000.0).open()  # never ticked
    return session, EngineService(session, socket_path(plan.state_dir))


def test_a_signal_handled_while_the_loop_holds_its_wake_s_lock_returns_and_is_seen(tmp_path):
    session, service = _service(tmp_path)
    try:
        done = []

        def the_main_thread():  # inside the loop's wait, the signal arrives
            with service._wake._cond:
                service.signalled(signal.SIGTERM)
                service.signalled(signal.SIGHUP)
                done.append(True)

        thread = threading.Thread(target=the_main_thread, daemon=True)
        thread.start()
        thread.join(10)
        assert done, "the handler waited for a lock its own thread held"
        assert service._box_down == "SIGTERM"  # the loop's next pass takes the box down
        assert service._stop_signalled
    finally:
        session.close()
