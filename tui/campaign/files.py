"""Hashing files, once for the whole core: corpus pins and bundle manifests."""

from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK = 1 << 20


def sha256_file(path: Path) -> tuple[str, int]:
    """(hex sha256, size in bytes) of a file, read in chunks."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size
