"""Crash-safe, hashed writes of torch files and their JSON sidecars.

A checkpoint that half-exists is worse than none: the resume would read
garbage. Every file this package keeps is written to a temporary name in the
same directory, fsynced, renamed over its final name with ``os.replace`` and the
directory fsynced, so a crash (even ``kill -9``) leaves either the old complete
file or the new complete file under the final name, never a partial one.

The sha256 is computed by a thread that reads the file back from the page cache
as it grows, so hashing overlaps the writes (given a spare core) and the fsync
(always), instead of adding a second pass after them. The sidecar
``<file>.json`` (hash, size, timing, kind, step) is written after the main
file, also atomically; a stale sidecar is removed before the main file is
replaced, so a sidecar never describes other bytes than the file next to it.

torch's per-record CRC32 is switched off for our own writes: the sha256 already
covers every byte, and the CRC would cost a second full pass of CPU.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

FORMAT_VERSION = 1
_crc_lock = threading.Lock()


@dataclass(frozen=True)
class WriteResult:
    path: Path
    sha256: str
    bytes: int
    write_s: float


def sidecar_path(path: str | os.PathLike) -> Path:
    path = Path(path)
    return path.with_name(path.name + ".json")


_NOTIFY_EVERY = 1 << 20
_READ_CHUNK = 8 << 20


class _FollowingHasher(threading.Thread):
    """Hashes a file while it is being written, by reading back what the writer
    reports as written (from the page cache). With a spare core the hash runs
    beside the writes; without one it still fills the wait for fsync. Hashing
    the bytes read back also means the digest is of the file, not of buffers."""

    def __init__(self, path: Path) -> None:
        super().__init__(name="itera-hash", daemon=True)
        self._fd = os.open(path, os.O_RDONLY)
        self._cond = threading.Condition()
        self._written = 0
        self._closed = False
        self._error: BaseException | None = None
        self._digest = ""
        self._size = 0

    def advance(self, written: int) -> None:
        with self._cond:
            self._written = written
            self._cond.notify()

    def finish(self) -> tuple[str, int]:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self.join()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._error is not None:
            raise self._error
        return self._digest, self._size

    def run(self) -> None:
        digest, offset = hashlib.sha256(), 0
        buffer = memoryview(bytearray(_READ_CHUNK))
        try:
            while True:
                with self._cond:
                    while offset >= self._written and not self._closed:
                        self._cond.wait()
                    target, closed = self._written, self._closed
                if offset >= target and closed:
                    break
                while offset < target:
                    n = os.preadv(self._fd, [buffer[:min(_READ_CHUNK, target - offset)]], offset)
                    if n <= 0:
                        raise OSError(f"file ended at {offset} bytes, {target} were written")
                    digest.update(buffer[:n])
                    offset += n
            self._digest, self._size = digest.hexdigest(), offset
        except BaseException as error:  # re-raised by finish() in the saving thread
            self._error = error


class _FdWriter:
    """File-like object for torch.save: unbuffered writes to a raw fd."""

    def __init__(self, fd: int, hasher: _FollowingHasher) -> None:
        self._fd = fd
        self._hasher = hasher
        self._notified = 0
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        n = view.nbytes
        while view:
            view = view[os.write(self._fd, view):]
        self.size += n
        if self.size - self._notified >= _NOTIFY_EVERY:
            self._notified = self.size
            self._hasher.advance(self.size)
        return n

    def flush(self) -> None:
        pass


def fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def remove_stale_temps(path: Path) -> None:
    """Delete temp files of `path` left by processes that died mid-write."""
    prefix = f".{path.name}.tmp-"
    try:
        entries = list(path.parent.iterdir())
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        pid_text = entry.name[len(prefix):].split("-", 1)[0]
        if pid_text.isdigit() and int(pid_text) != os.getpid() and not _pid_alive(int(pid_text)):
            try:
                entry.unlink()
            except OSError:
                pass


def write_json_atomic(path: Path, obj: dict) -> None:
    data = (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode()
    tmp = _temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
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


def write_torch_file(obj, path: str | os.PathLike, *, kind: str, step: int | None = None,
                     sidecar_extra: dict | None = None) -> WriteResult:
    """torch.save `obj` to `path` atomically; write its sidecar; return hash and timing."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    remove_stale_temps(sidecar_path(path))
    start = time.perf_counter()
    tmp = _temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    hasher = _FollowingHasher(tmp)
    hasher.start()
    try:
        writer = _FdWriter(fd, hasher)
        try:
            with _NoCrc32():
                torch.save(obj, writer)
        finally:
            hasher.advance(writer.size)
        os.fsync(fd)
        sha256, size = hasher.finish()
        if size != writer.size:
            raise OSError(f"hashed {size} bytes of {writer.size} written")
    except BaseException:
        try:
            hasher.finish()
        except BaseException:
            pass
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    side = sidecar_path(path)
    if side.exists():
        side.unlink()
        fsync_dir(path.parent)
    os.replace(tmp, path)
    fsync_dir(path.parent)
    write_s = time.perf_counter() - start
    record = {
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "file": path.name,
        "sha256": sha256,
        "bytes": size,
        "write_s": round(write_s, 6),
        "step": step,
        "t": time.time(),
    }
    record.update(sidecar_extra or {})
    write_json_atomic(side, record)
    return WriteResult(path=path, sha256=sha256, bytes=size, write_s=write_s)


def file_sha256(path: Path, chunk: int = 8 << 20) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size
