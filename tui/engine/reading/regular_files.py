"""Files a run controls are opened only when they are regular files.

A run owns its directory: it may swap `metrics.jsonl` for a FIFO (an open for
reading waits for a writer, forever), for a link to `/dev/zero` (a read never
ends) or for a directory. The engine opens every such file (metrics, printed
streams, `exit.json`, the control file, `samples.jsonl`) through here: with
`O_NONBLOCK` (so opening a FIFO returns at once) and `O_NOCTTY`, then checks
with `fstat` on the open descriptor (no race between a check and the open)
that it is a regular file. Anything else raises `NotRegular`, which names
what it was; the callers say it once and go on, and the other runs never
notice. Checked on each open: a file swapped later is caught on its next read.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
         (stat.S_ISDIR, "a directory"))


class NotRegular(OSError):
    """The path is there but is not a regular file (what it is, in words: `kind`)."""

    def __init__(self, path: Path, kind: str):
        super().__init__(f"{Path(path).name} is {kind}, not a regular file; ignored")
        self.path = Path(path)
        self.kind = kind


def kind_of(mode: int) -> str:
    for test, words in KINDS:
        if test(mode):
            return words
    return "not a regular file"


def open_regular(path: Path, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """A descriptor on `path`, a regular file (blocking I/O restored), or NotRegular.
    FileNotFoundError and the other OSErrors pass through as they are."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # opening a FIFO to write, with no reader
            raise NotRegular(path, "a FIFO") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(path, kind_of(info.st_mode))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path, offset: int = 0, limit: int = 1 << 20) -> bytes:
    """At most `limit` bytes of a regular file from `offset`."""
    fd = open_regular(path)
    try:
        return os.pread(fd, limit, offset)
    finally:
        os.close(fd)


def append_regular(path: Path, data: bytes, fsync: bool = False) -> None:
    """Append `data` to a regular file (created if missing)."""
    fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
