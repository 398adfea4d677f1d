"""SIGTERM or SIGHUP (tmux kill-session, a closed ssh) close the room like `q`.

The room is a client: the engine process goes on driving the campaign. The
signal is taken through the event loop, so the handler never runs in the
middle of a draw.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Callable


def quit_on_hangup(exit_app: Callable[[], None]) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(sig, exit_app)
        except (RuntimeError, ValueError, NotImplementedError):  # not the main thread
            return
