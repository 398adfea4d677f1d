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
import stat
import tempfile
from pathlib import Path

SOCKET_NAME = "engine.sock"
LOG_NAME = "engine.log"
MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, 104 on macOS


def private_runtime_dir() -> Path:
    """A folder only this user can enter: the runtime dir, else one of ours in /tmp."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and Path(base).is_dir():
        folder = Path(base) / "itera-tui"
    else:
        folder = Path(tempfile.gettempdir()) / f"itera-tui-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise OSError(f"{folder} is not a folder of this user's; refusing to put the "
                      "engine's socket there")
    os.chmod(folder, 0o700)
    return folder


def socket_path(state_dir: Path) -> Path:
    state_dir = Path(state_dir)
    here = state_dir / SOCKET_NAME
    if len(os.fsencode(str(here.absolute()))) <= MAX_SOCKET_PATH:
        return here.absolute()
    digest = hashlib.sha256(os.fsencode(str(state_dir.resolve()))).hexdigest()[:20]
    return private_runtime_dir() / f"{digest}.sock"


def engine_log(state_dir: Path) -> Path:
    return Path(state_dir) / LOG_NAME
