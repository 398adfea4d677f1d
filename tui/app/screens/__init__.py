"""Modal screens: every destructive key goes through one of these first; a run and the
ending each get a screen of their own.

Loaded on first use (PEP 562, as `textual.widgets` does): no screen is needed to
paint the room, and importing them all (RichLog pulls in `rich.pretty` and
`attrs`) cost the first paint about a tenth of its time. Reach them as
`screens.ConfirmScreen`, not with a module-level `from .screens import ...`.
"""

from __future__ import annotations

from ...lazy import lazy_exports

_HOMES = {
    "ConfirmScreen": "confirm", "DecisionScreen": "decision", "DoneScreen": "done",
    "DropChoice": "drop", "DropScreen": "drop", "HelpScreen": "help", "RunScreen": "run",
    "StopScreen": "stop", "WrapupScreen": "wrapup",
}

__all__ = sorted(_HOMES)


__getattr__ = lazy_exports(__name__, globals(), _HOMES)
