"""One driver per campaign: the engine lock in `.itera/engine.lock`.

The engine process (detached, or `run --headless` in the foreground) takes it
for as long as it drives the campaign (the file names its pid); anything that must not act while a
campaign is driven (`itera-tui new`) takes it for a moment too. A second
taker gets one clear error, never a second engine.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from .errors import CampaignDriven


def take_engine_lock(state_dir: Path, hint: str = "`itera-tui` opens the room on it, "
                     "`itera-tui status` reads its ledger") -> IO:
    """The open, locked file (closing it releases the lock); CampaignDriven if held."""
    f = open(Path(state_dir) / "engine.lock", "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        holder = f.read().strip() or "?"
        f.close()
        raise CampaignDriven(f"another itera-tui (pid {holder}) is driving this campaign; "
                          f"{hint}") from None
    f.seek(0)
    f.truncate()
    f.write(str(os.getpid()))
    f.flush()
    return f
