"""Whether an engine still has something to drive, and how long it stays once it has not.

The engine of a finished campaign stays a while so that a room or `status` reopened
on it gets its answers without a restart; every face (the daemon that lets it go,
the server's hello, `engine status`, the room's farewell) says the same thing about
it, from here.
"""

from __future__ import annotations

IDLE_EXIT_S = 1800.0  # a done campaign with no client: the engine goes (itera-tui restarts it)


def nothing_left(finished: bool, wrapping: bool, wrap, wrapup_never: bool = False) -> bool:
    """An engine has nothing left to drive: its campaign is finished and its wrap-up is
    done (`wrap`: the ledger's wrap-up, None when never started), or not to come."""
    return finished and not wrapping and (wrapup_never or (
        wrap is not None and wrap.state != "started"))


def engine_doing(pid, name: str, finished: bool) -> str:
    """What a live engine is there for, in one sentence: driving a campaign, or, once
    it is over, only answering (`engine status`, `engine start`, the room's farewell).
    A finished campaign's engine stays so a room or `status` reopened on it has its
    answers without a restart, and goes by itself after IDLE_EXIT_S with no room."""
    if not finished:
        return f"the engine (pid {pid}) drives {name}"
    return (f"{name} is finished, nothing left to drive; its engine (pid {pid}) stays only "
            f"to answer `itera-tui` and `itera-tui status`, and goes by itself "
            f"{IDLE_EXIT_S / 60:g} min after the last room closes")
