"""Read a growing file as complete segments, in bounded chunks and bounded memory.

A training process appends while we read. What it prints is not always lines:
a tqdm or Rich progress bar rewrites itself with `\\r` and ends a line only at
the end of an epoch (300 steps arrive as one 12,000-character "line"), and
colours numbers with ANSI escapes. So for printed streams `\\r` and `\\n` both
end a segment and escape sequences are removed before any pattern sees the
text. A segment is only handed over once its terminator has arrived (a torn
tail is waited for, never parsed half).

Memory is bounded whatever a run prints: at most `CHUNK` bytes are read at a
time, and an unterminated segment keeps at most `max_segment` bytes. Past
that, printed streams keep the segment's last `max_segment` bytes (the newest
values of a bar are at its end, and they are parsed when the segment ends);
the JSONL stream drops the whole line and reports it once it ends (a record
that long is not one the SDK writes).

A run may write faster than the engine reads. What is written but not yet
read is its `backlog` (bytes, from `fstat` at each read). With `shed_after`
set (the live engine sets it; readers after the fact do not), a backlog past
that many bytes is skipped: the tail jumps to its newest 64 KiB (a JSONL
line cut there is dropped, a printed segment keeps its tail) and counts what
it skipped in `skipped`, so the rules stay on the newest records whatever the
output rate, in bounded memory and CPU. What the file held at the first read (a backlog written while no engine
watched, read after a restart) is read whole first: only then is it armed.

A run may also truncate its file and write it again (a script that restarts
from step 0 opens it with "w"), or replace it (a new file renamed over the old
one). Reading on from the old offset would skip what it wrote since, a NaN
included, or read forever past the end. So each read compares the file with
the one read so far: a new inode, a size below the offset, or a different head
(its first `HEAD` bytes: a rewrite that is already longer than what was read)
is a new file, read again from its start and counted in `rewound`.

The file is opened only if it is a regular file (`regular_files`): a FIFO, a
device or a directory in its place is `refused` (in words) and read as empty.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .regular_files import NotRegular, open_regular

CHUNK = 256 << 10  # bytes read per call: bounds one call's memory and work
MAX_SEGMENT = 64 << 10  # bytes of an unterminated printed segment kept
SHED_TAIL = 64 << 10  # bytes read from the end after skipping a backlog: the newest records
HEAD = 256  # bytes at the file's start compared on each read: a rewrite in place differs

# CSI (colours, cursor moves: ESC [ ... final), OSC (titles, links: ESC ] ... BEL or ESC \),
# and the two-byte escapes (ESC 7, ESC M, ...). Never across a line end.
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\r\n]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text) if "\x1b" in text else text


class SegmentTail:
    """New complete segments of a growing file since the last call (decoded text).

    `printed=True`: `\\r` and `\\n` end a segment, ANSI escapes are removed,
    and an overlong segment keeps its tail. `printed=False` (JSONL): only
    `\\n` ends a line, and an overlong line is dropped and counted in `dropped`.
    """

    def __init__(self, path: Path, printed: bool, max_segment: int = MAX_SEGMENT,
                 chunk: int = CHUNK, shed_after: int | None = None):
        self.path = Path(path)
        self.printed = printed
        self.max_segment = max_segment
        self.chunk = chunk
        self.offset = 0
        self.more = False  # the last read filled a whole chunk: more may be waiting
        self.dropped = 0  # overlong JSONL lines discarded
        self.cut = 0  # overlong printed segments of which only the tail was kept
        self.shed_after = shed_after
        self.backlog = 0  # bytes written and not read yet, as of the last read
        self.skipped = 0  # bytes of backlog jumped over (shed_after), never read
        self.refused: str | None = None  # why the path cannot be read (not a regular file)
        self._partial = b""
        self._overflow = False  # the current unterminated segment outgrew max_segment
        self._resync = False  # after a jump: drop everything up to the first terminator
        self._first_size: int | None = None  # the file's size at the first read
        self.rewound = 0  # times the file was truncated or replaced and read from its start
        self._inode: tuple[int, int] | None = None  # (st_dev, st_ino) of the file read so far
        self._head = b""  # its first bytes as read (at most HEAD)

    def read(self) -> list[str]:
        try:
            fd = open_regular(self.path)
        except NotRegular as refused:
            self.refused, self.more = str(refused), False
            return []
        except OSError:  # missing (not yet), no permission: nothing to read now
            self.more = False
            return []
        try:
            self.refused = None
            info = os.fstat(fd)
            size = info.st_size
            if self._replaced(fd, info):
                self._rewind(size)
            if self._first_size is None:
                self._first_size = size
            if (self.shed_after is not None and self.offset >= self._first_size
                    and size - self.offset > self.shed_after):
                self._jump(size - min(self.chunk, SHED_TAIL))
            data = os.pread(fd, self.chunk, self.offset)
        except OSError:
            self.more = False
            return []
        finally:
            os.close(fd)
        self.more = len(data) == self.chunk
        self.backlog = max(0, size - self.offset - len(data))
        if not data:
            return []
        if self.offset < HEAD and len(self._head) == self.offset:
            self._head += data[:HEAD - self.offset]
        self.offset += len(data)
        if self._resync:
            found = [i for i in (data.find(b"\n"), data.find(b"\r") if self.printed else -1)
                     if i >= 0]
            first = min(found) if found else -1
            if first < 0:
                return []  # still inside the cut segment
            data, self._resync = data[first + 1:], False
        end = max(data.rfind(b"\n"), data.rfind(b"\r")) if self.printed else data.rfind(b"\n")
        if end < 0:  # no terminator in this chunk: the segment goes on
            self._hold(data)
            return []
        head, rest = data[:end], data[end + 1:]
        if self._overflow and not self.printed:
            first = head.find(b"\n")
            head = b"" if first < 0 else head[first + 1:]
            self._partial = b""
            self.dropped += 1
            if first < 0:
                self._overflow = False
                self._hold(rest)
                return []
        elif self._partial:
            head = self._partial + head
        self._partial = b""
        self._overflow = False
        self._hold(rest)
        text = head.decode("utf-8", "replace")
        if self.printed:
            return strip_ansi(text).splitlines()
        return text.split("\n")

    def pending(self) -> str:
        """The unterminated segment held so far (printed streams), as text: a progress
        bar's redraw is terminated only by the next redraw, a step later."""
        if not self.printed or not self._partial or self._resync:
            return ""
        return strip_ansi(self._partial.decode("utf-8", "replace"))

    def _replaced(self, fd: int, info: os.stat_result) -> bool:
        """The open file is not the one read so far: another inode, shorter than what was
        read, or other bytes at its start."""
        inode = (info.st_dev, info.st_ino)
        known, self._inode = self._inode, inode
        if known is None or self.offset == 0:
            return False
        if known != inode or info.st_size < self.offset:
            return True
        return bool(self._head) and os.pread(fd, len(self._head), 0) != self._head

    def _rewind(self, size: int) -> None:
        """Read the new file from its start, as a first read (its content read whole)."""
        self.rewound += 1
        self.offset, self._head, self._first_size = 0, b"", size
        self._partial, self._overflow, self._resync = b"", False, False

    def _jump(self, to: int) -> None:
        """Skip the backlog up to `to`: what lies between is counted, never read."""
        self.skipped += to - self.offset
        self.offset = to
        # a JSONL line cut in two is garbage: drop it; a printed segment keeps its tail (its
        # newest values are at its end, as for an overlong one)
        self._partial, self._overflow, self._resync = b"", False, not self.printed

    def _hold(self, data: bytes) -> None:
        """Keep the unterminated part, never more than max_segment bytes of it."""
        if not data:
            return
        if self._overflow and not self.printed:
            return  # dropping this line until its end
        held = self._partial + data if self._partial else data
        if len(held) > self.max_segment:
            if not self._overflow and self.printed:
                self.cut += 1
            self._overflow = True
            held = held[-self.max_segment:] if self.printed else b""
        self._partial = held
