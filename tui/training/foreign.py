"""Checkpoints a framework writes itself (an HF `checkpoint-N/` directory, a
Lightning `.ckpt`), made durable and fingerprinted so the SDK can acknowledge
them like its own.

The SDK's own files are written atomically and fsynced by `atomic`; a
framework's are not always (HF writes a directory of plain files, none of them
fsynced). An acknowledgement promises the engine that the bytes are on disk
and hashed, so the files and their folders are fsynced before the hash is
taken. The hash of a directory is `tui.campaign.files.tree_digest`, the same
definition the engine's watcher and the bundle use. Stdlib only.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..campaign.files import sha256_path, tree_files


def _fsync(path: Path, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on a directory: not fatal
        pass
    finally:
        os.close(fd)


def make_durable(path: Path) -> None:
    """fsync a file, or every file and folder of a directory, and the parent folder."""
    path = Path(path)
    directory = getattr(os, "O_DIRECTORY", 0)
    if path.is_dir():
        folders = {path}
        for _, file in tree_files(path):
            _fsync(file)
            folders.add(file.parent)
        for folder in folders:
            _fsync(folder, os.O_RDONLY | directory)
    else:
        _fsync(path)
    _fsync(path.parent, os.O_RDONLY | directory)


def fingerprint(path: Path) -> tuple[str, int]:
    """(sha256, bytes) of a durable checkpoint file or directory."""
    make_durable(path)
    return sha256_path(path)
