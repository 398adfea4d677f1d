"""Where a campaign's engine listens, and where it writes what it says.

The socket is `.itera/engine.sock`, owner only (0600). A Unix socket's name
holds at most 107 bytes, so a campaign folder deep in a home directory gets
its socket in the user's runtime directory instead (`$XDG_RUNTIME_DIR`, else
a 0700 folder of ours under the temp dir), named by a digest of the state
folder's real path: every client computes the same name, and no file has to
be read to find it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..runtime import private_dir

SOCKET_NAME = "engine.sock"
LOG_NAME = "engine.log"
MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, 104 on macOS


def socket_path(state_dir: Path) -> Path:
    state_dir = Path(state_dir)
    here = state_dir / SOCKET_NAME
    if len(os.fsencode(str(here.absolute()))) <= MAX_SOCKET_PATH:
        return here.absolute()
    digest = hashlib.sha256(os.fsencode(str(state_dir.resolve()))).hexdigest()[:20]
    return private_dir("engine") / f"{digest}.sock"


def engine_log(state_dir: Path) -> Path:
    return Path(state_dir) / LOG_NAME
