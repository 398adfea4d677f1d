"""Private folders for sockets: one home for "a directory only this user can enter".

Outside the layers (like `tui.lazy`): the engine's socket (`tui.service.paths`) and
the ssh ControlMaster sockets (`tui.remote.ssh`) both need one.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def private_dir(purpose: str) -> Path:
    """A directory only this user can enter (`itera-tui-PURPOSE-UID`): for the ssh
    ControlMaster sockets and an engine socket whose campaign path is too long.

    $XDG_RUNTIME_DIR when it is ours, else the temp dir; a path that exists but is not
    a directory of ours with mode 0700 is never used (someone could listen there)."""
    uid = os.getuid()
    bases = [os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir()]
    for base in bases:
        if not base:
            continue
        path = Path(base) / f"itera-tui-{purpose}-{uid}"
        try:
            path.mkdir(mode=0o700, exist_ok=True)
            info = path.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
            continue
        if stat.S_IMODE(info.st_mode) != 0o700:
            try:
                os.chmod(path, 0o700)
            except OSError:
                continue
        return path
    return Path(tempfile.mkdtemp(prefix=f"itera-tui-{purpose}-"))
