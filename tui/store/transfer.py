"""Streamed copies between this disk and a store, hashed on the way (bounded memory).

Every copy goes in `CHUNK` pieces and hashes what it moves, so a 20 GB checkpoint
costs a few MiB of memory and its sha256 comes for free. An upload to an object
store (s3, gcs, azure) is invisible until whole, so it goes straight to its name;
to a filesystem that can show a half-written file (sftp, a local mount) it goes to
`<name>.part` first and is renamed when complete. A download goes to `<dest>.part`
and is renamed only when its length and hash are those expected.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

CHUNK = 8 << 20
WHOLE_ON_CLOSE = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "memory")


@dataclass(frozen=True)
class Moved:
    """One copy's result: bytes moved and their sha256."""

    bytes: int
    sha256: str


def _protocol(fs) -> str:
    proto = fs.protocol
    return proto[0] if isinstance(proto, (tuple, list)) else str(proto)


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path.strip("/") else ""


class LocalGone(OSError):
    """The local file to send is gone or unreadable (a rotated checkpoint): not the store's
    failure, so never a "store down"."""


def upload_file(fs, local: Path, remote: str, *, limit: int | None = None,
                tail: bool = False, run_controlled: bool = False) -> Moved:
    """Copy `local` to `remote` streaming, hashing what was sent; `limit`: at most that
    many bytes (the last ones with `tail`). Atomic for the reader (see above). The local
    file is opened before the store is touched: LocalGone when it cannot be.
    `run_controlled`: a file a run can swap (its records, its deliverables) is opened
    only as a regular file and never through a link at its end (a FIFO would block the
    mirror, a link would send what it points at); LocalGone otherwise."""
    try:
        if run_controlled:
            from ..engine.reading.regular_files import open_regular

            fh = os.fdopen(open_regular(local, os.O_RDONLY | os.O_NOFOLLOW), "rb")
        else:
            fh = open(local, "rb")
        size = os.fstat(fh.fileno()).st_size
    except OSError as exc:
        raise LocalGone(f"{local}: {exc.strerror or exc}") from None
    with fh:
        start = max(0, size - limit) if (limit is not None and tail) else 0
        todo = size - start if limit is None or tail else min(size, limit)
        return _upload_stream(fs, _chunks(fh, start, todo), remote)


def upload_bytes(fs, data: bytes, remote: str) -> Moved:
    return _upload_stream(fs, iter((data,)), remote)


def _chunks(fh, start: int, todo: int):
    fh.seek(start)
    while todo > 0:
        block = fh.read(min(CHUNK, todo))
        if not block:
            break
        todo -= len(block)
        yield block


def _upload_stream(fs, blocks, remote: str) -> Moved:
    direct = _protocol(fs) in WHOLE_ON_CLOSE
    target = remote if direct else remote + ".part"
    parent = _parent(remote)
    if parent and not direct:
        fs.makedirs(parent, exist_ok=True)
    digest, n = hashlib.sha256(), 0
    with fs.open(target, "wb") as out:
        for block in blocks:
            digest.update(block)
            out.write(block)
            n += len(block)
    if not direct:
        if fs.exists(remote):
            fs.rm(remote)
        fs.mv(target, remote)
    return Moved(n, digest.hexdigest())


def remote_size(fs, remote: str) -> int | None:
    try:
        info = fs.info(remote)
    except (FileNotFoundError, OSError):
        return None
    size = info.get("size")
    return int(size) if isinstance(size, int) else None


def hash_remote(fs, remote: str) -> Moved:
    """Read `remote` back in chunks and hash it (FileNotFoundError when absent)."""
    digest, n = hashlib.sha256(), 0
    with fs.open(remote, "rb", block_size=CHUNK) as fh:
        while True:
            block = fh.read(CHUNK)
            if not block:
                break
            digest.update(block)
            n += len(block)
    return Moved(n, digest.hexdigest())


def download_file(fs, remote: str, dest: Path, *, sha256: str | None = None,
                  size: int | None = None) -> Moved:
    """Copy `remote` to `dest` streaming; with `sha256`/`size` the copy is kept only if
    it matches (ValueError names the difference), so a partial file never takes its name."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    digest, n = hashlib.sha256(), 0
    try:
        with fs.open(remote, "rb", block_size=CHUNK) as fh, open(tmp, "wb") as out:
            while True:
                block = fh.read(CHUNK)
                if not block:
                    break
                digest.update(block)
                out.write(block)
                n += len(block)
        moved = Moved(n, digest.hexdigest())
        if size is not None and n != size:
            raise ValueError(f"{remote}: {n} bytes in the store, {size} expected")
        if sha256 is not None and moved.sha256 != sha256:
            raise ValueError(f"{remote}: sha256 differs from the one recorded")
        os.replace(tmp, dest)
        return moved
    finally:
        if tmp.exists():
            tmp.unlink()
