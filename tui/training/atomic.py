"""Crash-safe, hashed writes of torch files and their JSON sidecars.

A checkpoint that half-exists is worse than none: the resume would read
garbage. Every file this package keeps is written to a temporary name in the
same directory, fsynced, renamed over its final name with ``os.replace`` and the
directory fsynced, so a crash (even ``kill -9``) leaves either the old complete
file or the new complete file under the final name, never a partial one.

The digest is computed in the write's own pass: torch.save writes into a file
object that hashes each chunk on its way to the descriptor, so no byte is read
back (the read-back cost as much CPU as the write). The sidecar ``<file>.json``
(digest, size, timing, kind, step) is written to its own temporary file before
anything is renamed; then the stale sidecar is removed, the file renamed, the
new sidecar renamed, so a sidecar never describes other bytes than the file
next to it, and a write that fails (a full disk) leaves the previous file and
sidecar untouched and no temporary file behind.

Each fsync costs a disk cache flush (about 4 ms on a cloud VM's disk, some 2 %
of a 256 MB save), so there are no more than the guarantee needs: the file,
the sidecar, and the directory once after both renames. Only when the file
replaces an older one is the directory also synced between the two renames (a
crash there must not leave the new sidecar beside the old bytes); a new file,
as each `step-NNNNNN.pt` is, has no old bytes to be misdescribed: whichever
rename a crash keeps, a sidecar beside a file describes that file's bytes.

A full disk is named as such: torch turns a failed write into ``unexpected
pos ...``; the writer keeps the OSError and raises it instead, with the file's
name, its full path and how much of it was written.

torch's per-record CRC32 is switched off for our own writes: the digest already
covers every byte, and the CRC measured 0.11 CPU-s per 500 MB here, which
nearly doubles the save's CPU (torch 2.13; ``bench/checkpoint_bench.py`` prints
it as "CRC32 off vs on").
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .digest import SHA256, file_digest, new_hasher, sidecar_digest, split, verify_hash
from .tempfiles import fsync_dir, remove_stale_temps, sweep_once, temp_name

__all__ = ["FORMAT_VERSION", "WriteResult", "write_torch_file", "write_json_atomic", "sidecar_path",
           "file_sha256", "file_digest", "sidecar_digest", "verify_hash", "fsync_dir", "remove_stale_temps"]

FORMAT_VERSION = 1
_crc_lock = threading.Lock()
_DISK_FULL = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded"}


@dataclass(frozen=True)
class WriteResult:
    path: Path
    digest: str  # "algorithm:hex", as in the sidecar
    bytes: int
    write_s: float

    @property
    def algorithm(self) -> str:
        return split(self.digest)[0]

    @property
    def sha256(self) -> str | None:
        """The hex sha256 when that is the digest's algorithm, else None."""
        algorithm, hex_part = split(self.digest)
        return hex_part if algorithm == SHA256 else None


def sidecar_path(path: str | os.PathLike) -> Path:
    path = Path(path)
    return path.with_name(path.name + ".json")


def _human(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _named(error: OSError, path: Path, written: int) -> OSError:
    """The OSError to raise for a write of `path` that failed with `error`: a full
    disk says so with the file's name (in strerror, which the metrics event
    shows) and its full path (in filename, which the traceback shows)."""
    what = _DISK_FULL.get(error.errno)
    if what is None:
        return error
    try:
        free = f", {_human(shutil.disk_usage(path.parent).free)} free there now"
    except OSError:
        free = ""
    named = OSError(error.errno, f"{what} writing {path.name} ({_human(written)} of it written{free})",
                    str(path))
    named.__cause__ = error
    return named


class _HashingWriter:
    """The file object torch.save writes into: each chunk is hashed, then written
    unbuffered to the descriptor. torch's zip writer calls only write() and
    flush() on a file object (no seek, no tell). The first OSError is kept and
    raised again on every later write, since torch goes on after one."""

    def __init__(self, fd: int, algorithm: str) -> None:
        self._fd = fd
        self._algorithm = algorithm
        self._hasher = new_hasher(algorithm)
        self.size = 0
        self.error: OSError | None = None

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if self.error is not None:
            raise self.error
        view = memoryview(data).cast("B")
        n = view.nbytes
        self._hasher.update(view)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as error:
            self.error = error
            raise
        self.size += n
        return n

    def flush(self) -> None:
        pass

    @property
    def digest(self) -> str:
        return f"{self._algorithm}:{self._hasher.hexdigest()}"


def _write_temp(path: Path, data: bytes) -> Path:
    """`data` in a fsynced temp file beside `path`; nothing is left behind on failure."""
    tmp = temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    view, written = memoryview(data), 0
    try:
        while written < len(data):
            written += os.write(fd, view[written:])
        os.fsync(fd)
    except OSError as error:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise _named(error, path, written)
    os.close(fd)
    return tmp


def _json_bytes(obj: dict) -> bytes:
    return (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode()


def write_json_atomic(path: Path, obj: dict) -> None:
    tmp = _write_temp(path, _json_bytes(obj))
    os.replace(tmp, path)
    fsync_dir(path.parent)


class _NoCrc32:
    def __enter__(self):
        from torch.utils.serialization import config

        _crc_lock.acquire()
        self._config = config
        self._before = config.save.compute_crc32
        config.save.compute_crc32 = False

    def __exit__(self, *exc):
        self._config.save.compute_crc32 = self._before
        _crc_lock.release()


def _save_to_temp(obj, path: Path, algorithm: str) -> tuple[Path, _HashingWriter]:
    """torch.save `obj` into a fsynced temp file beside `path`, hashing as it goes."""
    import torch

    tmp = temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    writer = _HashingWriter(fd, algorithm)
    try:
        try:
            with _NoCrc32():
                torch.save(obj, writer)
        except BaseException:
            if writer.error is None:
                raise
        if writer.error is not None:  # torch reports it as "unexpected pos"; say what it was
            raise writer.error
        os.fsync(fd)
    except BaseException as error:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise _named(error, path, writer.size)
        raise
    os.close(fd)
    return tmp, writer


def write_torch_file(obj, path: str | os.PathLike, *, kind: str, step: int | None = None,
                     sidecar_extra: dict | None = None, algorithm: str = SHA256) -> WriteResult:
    """torch.save `obj` to `path` atomically with its sidecar; return digest, size, timing.

    `algorithm` names the sidecar's digest (digest.py): sha256 by default, the
    fast one for checkpoints. On any failure the previous file and sidecar stay."""
    path = Path(path)
    start = time.perf_counter()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise _named(error, path, 0)
    side = sidecar_path(path)
    sweep_once(path.parent)
    tmp, writer = _save_to_temp(obj, path, algorithm)
    write_s = time.perf_counter() - start
    # One digest field, never two that could disagree: a sha256 sidecar is the
    # first format ("sha256": hex), any other says its algorithm ("digest").
    hashed = {"sha256": split(writer.digest)[1]} if algorithm == SHA256 else {"digest": writer.digest}
    record = {"format_version": FORMAT_VERSION, "kind": kind, "file": path.name, **hashed,
              "bytes": writer.size, "write_s": round(write_s, 6), "step": step, "t": time.time()}
    record.update(sidecar_extra or {})
    try:
        side_tmp = _write_temp(side, _json_bytes(record))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        if side.exists():
            side.unlink()
            fsync_dir(path.parent)
        replaces = path.exists()
        os.replace(tmp, path)
        if replaces:  # the new bytes are durable before a new sidecar could name the old ones
            fsync_dir(path.parent)
        os.replace(side_tmp, side)
        fsync_dir(path.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        side_tmp.unlink(missing_ok=True)
        raise
    return WriteResult(path=path, digest=writer.digest, bytes=writer.size,
                       write_s=time.perf_counter() - start)


def file_sha256(path: Path) -> tuple[str, int]:
    """(hex sha256, size) of a file: what the bundle manifest and old sidecars record."""
    digest, size = file_digest(path, SHA256)
    return split(digest)[1], size
