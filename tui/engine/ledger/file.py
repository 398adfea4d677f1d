"""The append-only ledger: every fact of a campaign, one fsync'ed, checksummed JSON line.

The ledger is the campaign's memory. State is never stored anywhere else: it is
`replay(ledger)`, so a control room killed with -9 and started again rebuilds
exactly what it knew. That makes a damaged line dangerous: skipped silently,
a lost `run_launched` relaunches a finished run. So every line carries a
checksum and is validated on read (the event types of tui.engine.ledger.events), and what cannot
be replayed is *reported* (tui.engine.ledger.damage: line, seq, what was
lost), never skipped in silence.

Line format: the event's JSON object, its last field `crc`: the CRC-32 (8 hex
digits) of the line's own bytes with that field taken out, i.e. of
`line[:-20] + b"}"` (the field is always the 20 bytes `, "crc": "xxxxxxxx"}`).
CRC-32 rather than a hash because the threat is accidental damage (a torn
write, a block of NULs after a power cut, a stray edit), not forgery: it
catches every burst up to 32 bits, misses random damage 1 time in 4 billion,
is C-fast in the stdlib and costs 20 bytes a line; TensorBoard's records use
a CRC for the same reason. Over the bytes as written, not a re-serialised
value: any language checks it without agreeing on how to print a float, and
reading costs one CRC over bytes already in memory. Lines written before
checksums (no `crc`) are read as legacy while no checksummed line precedes
them; after one, a line without a checksum is damage.

A torn last line (a crash or a full disk in the middle of a write) is never
parsed half: a failed append cuts its own partial bytes, and the next open
cuts what a crash left, so a new event never glues onto a torn one.

The file stays open between appends (`_AppendFile`), each line still written
whole and fsync'ed before `append` returns; a file replaced, removed or made
unwritable under the engine is opened again by its path, as a fresh open would.
"""

from __future__ import annotations

import errno
import json
import os
import re
import threading
import weakref
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ..errors import EngineError, LedgerUnwritable
from .damage import Decoded, LedgerDamage, LedgerReport, assess, open_refusal
from .events import Event, UnknownEvent, from_record, problem_of

SEQ_MARK = b'{"seq": '  # how every line the engine writes begins
_SEQ_RE = re.compile(rb'"seq"\s*:\s*(\d{1,12})\b')
_EVENT_RE = re.compile(rb'"event"\s*:\s*"([A-Za-z_]{1,40})"')


CRC_FIELD = b', "crc": "'  # then 8 hex digits and '"}': the last 20 bytes of a line
CRC_LEN = len(CRC_FIELD) + 10


def checksum(body: bytes) -> bytes:
    return b"%08x" % zlib.crc32(body)


_ENCODER = json.JSONEncoder(default=str)  # made once: json.dumps(default=) makes one a call


def encode_line(record: dict) -> bytes:
    """The line for `record`: its JSON with a last field `crc` over the bytes before it."""
    body = _ENCODER.encode(record).encode()
    if not body.startswith(b"{") or len(body) < 3:
        raise ValueError("a ledger record is a non-empty JSON object")
    return body[:-1] + CRC_FIELD + checksum(body) + b'"}\n'


class Ledger:
    def __init__(self, path: Path, clock: Callable[[], float], report=None):
        """`report`: this file's report, already read (the open check reads it); read
        again only when the torn-tail repair changed the file."""
        self.path = Path(path)
        self.clock = clock
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repaired = False
        self.ended_tail = 0  # bytes of a torn tail ended with a newline (not cut: append-only)
        self.cut_tail = self._repair_torn_tail()  # bytes a crash left half-written
        self.report = (report if report is not None and not self._repaired
                       else read_ledger_report(self.path))
        self._seq = self.report.last_seq  # never reuses a seq, not even a damaged line's
        self._dirty = False  # a failed append could not cut its partial bytes
        self._file = _AppendFile(self.path)
        weakref.finalize(self, self._file.close)  # a Ledger dropped without close()

    def close(self) -> None:
        """Let go of the file (appends after this open it again)."""
        with self._lock:
            self._file.close()

    def _repair_torn_tail(self) -> int:
        """Cut a torn last line so the next event does not glue onto it; bytes cut."""
        try:
            f = open(self.path, "rb+")
        except FileNotFoundError:
            return 0
        except PermissionError as exc:  # append-only (chattr +a), read-only, immutable
            return self._end_torn_tail(exc)
        with f:
            data = f.read()
            if not data or data.endswith(b"\n"):
                return 0
            self._repaired = True
            cut = data.rfind(b"\n") + 1
            if decode_line(data[cut:], checked_before=True).event is not None:
                f.write(b"\n")  # a whole checksummed event that only lost its newline
                torn = 0
            else:
                f.truncate(cut)
                torn = len(data) - cut
            f.flush()
            os.fsync(f.fileno())
            return torn

    def _end_torn_tail(self, refused: OSError) -> int:
        """A ledger we may not rewrite: a torn tail cannot be cut, so it is ended with a
        newline where appending is allowed (it stays as one damaged line, which the
        report names); where nothing may be written, LedgerUnwritable."""
        try:
            with open(self.path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 1))
                if size == 0 or f.read(1) == b"\n":
                    return 0  # nothing torn: appends will say whether they may write
                f.seek(0)
                data = f.read()
        except OSError as exc:
            raise self._torn_error(exc) from exc
        torn = len(data) - (data.rfind(b"\n") + 1)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            try:
                _write_all(fd, b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise self._torn_error(exc, torn) from exc
        self._repaired = True
        self.ended_tail = torn
        return 0

    def _torn_error(self, exc: OSError, torn: int | None = None) -> LedgerUnwritable:
        what = (f"its last line is torn ({torn} bytes) and can be neither cut nor ended"
                if torn else "its torn last line cannot be cut")
        return LedgerUnwritable(exc.errno, exc.strerror or str(exc), str(self.path), what)

    def append(self, event: Event) -> Event:
        """Write one event, stamped with its seq and time; returns it as stamped."""
        if not isinstance(event, Event) or isinstance(event, UnknownEvent):
            raise TypeError(f"the ledger takes the event classes of ledger.events, "
                            f"not {type(event).__name__}")
        with self._lock:
            if self._dirty:
                try:
                    self._repair_torn_tail()
                except OSError as exc:
                    raise self._error(exc, event.KIND) from exc
                self._dirty = False
            seq = self._seq + 1
            stamped = event.stamped(seq, round(self.clock(), 3))
            record = stamped.to_record()
            line = encode_line(record)
            problem = problem_of(record)
            if problem is not None:  # a value JSON writes as text (a Path): as replay sees it
                record = json.loads(line[:-CRC_LEN - 1] + b"}")
                problem = problem_of(record)
                stamped = from_record(record)
            if problem is not None:  # a bug of ours: refused before a replay could trip on it
                raise ValueError(f"ledger event {event.KIND!r} not written: {problem}")
            try:
                fd, size = self._file.open()
            except OSError as exc:
                raise self._error(exc, event.KIND) from exc
            try:
                _write_all(fd, line)
                os.fsync(fd)
            except OSError as exc:
                self._take_back(fd, size)
                self._file.close()  # the next append opens the path again, as at the start
                raise self._error(exc, event.KIND) from exc
            self._seq = seq
            return stamped

    def _take_back(self, fd: int, size: int) -> None:
        """Cut the partial line of a failed append (truncating needs no free space)."""
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        except OSError:
            self._dirty = True  # the next append (or open) cuts it first

    def _error(self, exc: OSError, event: str) -> LedgerUnwritable:
        reason = exc.strerror or str(exc)
        return LedgerUnwritable(exc.errno, reason, str(self.path),
                                f"cannot append the {event} event to the ledger; "
                                "nothing was recorded")


class _AppendFile:
    """The ledger file, opened for appending once and kept open between appends.

    Opening and closing the file at every append was a third of an append's CPU
    (beside its fsync). Kept open, the descriptor must still be the file at the
    path, as a fresh open would be: before each append one `stat` of the path is
    compared with what the descriptor was opened on (device, inode, mode, owner).
    A file replaced, renamed away or removed under the engine, or whose mode or
    owner changed, is opened again by its path, so the write lands where a fresh
    open puts it and a file made unwritable is refused as before; a truncated one
    needs nothing (O_APPEND writes at its end). The same `stat` gives the size a
    failed append cuts back to.
    """

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None
        self._opened_on: tuple | None = None

    def open(self) -> tuple[int, int]:
        """The descriptor to append to and the file's size before the append."""
        if self._fd is not None:
            try:
                now = os.stat(self.path)
            except OSError:
                now = None  # removed, or the path cannot be looked at: open it again
            if now is not None and _identity(now) == self._opened_on:
                return self._fd, now.st_size
            self.close()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        opened = os.fstat(fd)
        self._fd, self._opened_on = fd, _identity(opened)
        return fd, opened.st_size

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _identity(st: os.stat_result) -> tuple:
    return st.st_dev, st.st_ino, st.st_mode, st.st_uid, st.st_gid


def _write_all(fd: int, data: bytes) -> None:
    """os.write may write less than asked (a disk filling up): loop, never drop bytes."""
    done, rest = 0, data  # the usual case: all of it in one call, no view made
    while True:
        written = os.write(fd, rest)
        if written <= 0:
            raise OSError(errno.ENOSPC, f"short write: {done} of {len(data)} bytes written")
        done += written
        if done >= len(data):
            return
        rest = memoryview(data)[done:]


def decode_line(raw: bytes, checked_before: bool) -> Decoded:
    """One line: the replayable event, or why not and what it seems to have been."""
    if not raw.strip():
        return Decoded(problem="empty line")
    checked = raw[-CRC_LEN:-10] == CRC_FIELD and raw.endswith(b'"}')
    body = raw[:-CRC_LEN] + b"}" if checked else raw
    if checked and raw[-10:-2] != checksum(body):
        return _guessed(raw, "checksum mismatch", _loads(body))
    record = _loads(body)
    if record is None:
        what = "NUL bytes" if b"\0" in raw else "not valid JSON"
        return _guessed(raw, f"not a JSON record ({what})")
    if not isinstance(record, dict):
        return _guessed(raw, "not a JSON object")
    if not checked and "crc" in record:
        return _guessed(raw, "checksum mismatch (not where the writer puts it)", record)
    if not checked and checked_before:
        return _guessed(raw, "no checksum (written after checksummed lines)", record)
    problem = problem_of(record)
    if problem is not None:
        return _guessed(raw, problem, record)
    return Decoded(event=from_record(record), checked=checked)


def _loads(data: bytes):
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _guessed(raw: bytes, problem: str, record: dict | None = None) -> Decoded:
    """What a damaged line seems to have been, for the report (never replayed)."""
    known = record if isinstance(record, dict) else {}
    seq, event = known.get("seq"), known.get("event")
    if not (isinstance(seq, int) and not isinstance(seq, bool)):
        found = _SEQ_RE.search(raw)
        seq = int(found.group(1)) if found else None
    if not isinstance(event, str):
        found = _EVENT_RE.search(raw)
        event = found.group(1).decode() if found else None
    return Decoded(problem=problem, seq_guess=seq, event_guess=event)


def _salvage(raw: bytes, checked_before: bool) -> tuple[int, Decoded] | None:
    """A whole checksummed event glued after junk (a NUL block ate a newline)."""
    at = raw.rfind(SEQ_MARK)
    if at <= 0:
        return None
    tail = decode_line(raw[at:], checked_before)
    return (at, tail) if tail.checked and tail.event is not None else None


def read_ledger_report(path: Path, runs_dir: Path | None = None) -> LedgerReport:
    """Every replayable event and every damaged line, in file order. With `runs_dir`,
    run directories the ledger does not know are found too (see LedgerReport.fatal)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return assess([], exists=False, runs_dir=runs_dir)
    except OSError as exc:  # a directory, no permission: nothing can be said of its events
        unread = assess([], exists=True, runs_dir=runs_dir)
        return replace(unread, fatal=f"{Path(path).name} cannot be read "
                                     f"({exc.strerror or exc})")
    raws = data.split(b"\n")
    tail = raws.pop()  # the part after the last newline: torn, or being written now
    lines: list[tuple[int, Decoded]] = []
    checked = False
    for number, raw in enumerate(raws, 1):
        decoded = decode_line(raw, checked)
        salvaged = _salvage(raw, checked) if decoded.event is None else None
        if salvaged is not None:
            at, decoded = salvaged
            lines.append((number, Decoded(problem=f"{at} bytes of junk before the event",
                                          seq_guess=None, event_guess=None)))
        checked = checked or decoded.checked
        lines.append((number, decoded))
    torn = 0
    if tail:
        decoded = decode_line(tail, True)
        if decoded.event is not None:  # whole and checksummed: only its newline is missing
            lines.append((len(raws) + 1, decoded))
        else:
            torn = len(tail)
    return assess(lines, exists=True, runs_dir=runs_dir, torn_tail_bytes=torn)


def read_ledger(path: Path) -> list[dict]:
    """The replayable events. Damage is not dropped in silence: read_ledger_report
    names it, and the engine refuses to open a ledger whose damage matters."""
    return list(read_ledger_report(path).events)


__all__ = ["Ledger", "LedgerDamage", "LedgerReport", "read_ledger", "read_ledger_report",
           "decode_line", "encode_line"]


def check_can_open(state_dir: Path, strict_run_dirs: bool = False) -> LedgerReport:
    """The report of `state_dir`'s ledger, or an EngineError when going on would start
    the campaign over, relaunch a run or reset the window. `strict_run_dirs` also
    refuses a run directory no event claims when nothing else is damaged (right once
    the engine records its intent before a run directory is made)."""
    state_dir = Path(state_dir)
    report = read_ledger_report(state_dir / "ledger.jsonl", state_dir / "runs")
    refusal = open_refusal(state_dir, report, strict_run_dirs)
    if refusal is not None:
        raise EngineError(refusal)
    return report
