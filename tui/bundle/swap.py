"""Swapping a finished bundle in for the previous one, and its size.

Split from wrapup.py: the new bundle replaces the previous one only once it is
complete (two renames and an fsync of the outputs folder), so a crash mid-build
never leaves half a bundle where the previous one was.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

OLD_PREFIX = ".bundle-old-"


def bundle_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def swap_in(staging: Path, final: Path) -> None:
    """Replace the previous bundle only now that the new one is complete."""
    old = None
    if final.exists():
        old = final.with_name(f"{OLD_PREFIX}{os.getpid()}")
        os.replace(final, old)
    try:
        os.replace(staging, final)
    except OSError:
        if old is not None:
            os.replace(old, final)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    try:
        fd = os.open(final.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
