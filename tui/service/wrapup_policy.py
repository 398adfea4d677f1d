"""Wrap-up policy: whether the engine builds the bundle by itself when the campaign ends.

The detached engine wraps up a finished campaign once (unless a bundle was
already built); `run --headless` rebuilds and verifies at every end, as it
always did; `run --headless --no-wrapup` never does. An asked-for wrap-up (the
room's key, `itera-tui wrapup`) starts here too, so it is never started twice.
"""

from __future__ import annotations

import enum
from typing import Callable


class WrapupPolicy(str, enum.Enum):
    ONCE = "once"  # the detached engine: wrap up a finished campaign unless already done
    ALWAYS = "always"  # `run --headless`: rebuild and verify at every end, as it always did
    NEVER = "never"  # `run --headless --no-wrapup`


class Wrapups:
    """The policy applied to one engine's session."""

    def __init__(self, session, policy: WrapupPolicy, on_line: Callable[[str], None] | None):
        self.session = session
        self.policy = policy
        self.on_line = on_line
        self.started = False

    def start(self):
        self.started = True
        return self.session.start_wrapup(self.on_line)

    def wanted(self, snap) -> bool:
        if self.policy is WrapupPolicy.NEVER or self.started or snap.wrapup.running:
            return False
        if not snap.engine.finished:  # with [store]: early enough to deliver in time
            return self.session.wrapup_due_for_delivery(snap)
        if self.policy is WrapupPolicy.ALWAYS:
            return True
        wrap = snap.state.wrapup
        return wrap is None or wrap.state == "started"  # never built, or cut short
