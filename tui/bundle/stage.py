"""Write files into the bundle being built, hashing them as they go.

Every file of a bundle passes through `Stager`, so none can miss the
manifest: it records the relative path, size, sha256 and kind of each file,
rewrites this machine's paths in text (see paths.Scrubber, keeping the
original hash as source_sha256; logs go through the stronger LogRedactor and
are marked `redacted`), and leaves empty files out (a bundle holds no empty
file; the omission is recorded instead). A full disk surfaces as `DiskFull`,
naming the bundle file being written, never as a bare OSError.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .paths import TEXT_SNIFF, Scrubber, is_text

CHUNK = 8 << 20
SCRUB_LIMIT = 256 << 20  # larger text files are copied as they are


FULL = (errno.ENOSPC, errno.EDQUOT)
EVIDENCE = ("log", "ledger")  # kept as they were written, machine paths redacted


class DiskFull(Exception):
    """The disk filled up while the bundle was being written; `rel` names the file."""

    def __init__(self, rel: str, error: OSError):
        super().__init__(f"no space left on device while writing {rel}: "
                         f"{error.strerror or error}")
        self.rel = rel


@contextmanager
def full_disk_named(rel: str):
    try:
        yield
    except OSError as error:
        if error.errno in FULL:
            raise DiskFull(rel, error) from None
        raise


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative to the bundle, posix
    bytes: int
    sha256: str
    kind: str
    run: str | None = None
    source_sha256: str | None = None  # set when paths were rewritten
    unit: str | None = None  # the checkpoint directory this file belongs to
    redacted: bool = False  # a log whose machine paths were rewritten

    def to_dict(self) -> dict:
        out = {"path": self.path, "bytes": self.bytes, "sha256": self.sha256,
               "kind": self.kind}
        for key in ("run", "unit"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.source_sha256:
            out["source_sha256"] = self.source_sha256
            out["paths_rewritten"] = True
            if self.redacted:
                out["redacted"] = True
        return out


def _pieces(f):
    """A file's bytes in blocks of about CHUNK, each cut after its last newline."""
    held = b""
    while block := f.read(CHUNK):
        data = held + block
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) < 4 * CHUNK:
            held = data  # no newline yet: keep reading (a line this long is rare)
            continue
        if cut == 0:  # a line over 32 MiB: cut at a character boundary
            cut = len(data) - 1
            while cut > 0 and data[cut] & 0xC0 == 0x80:
                cut -= 1
        held = data[cut:]
        yield data[:cut]
    if held:
        yield held


def _all_text(src: Path) -> bool:
    """UTF-8 text throughout, checked a block at a time (the scrub's own test, bounded)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with open(src, "rb") as f:
            if b"\0" in f.read(TEXT_SNIFF):
                return False
            f.seek(0)
            while block := f.read(CHUNK):
                decoder.decode(block)
            decoder.decode(b"", final=True)
    except (UnicodeDecodeError, OSError):
        return False
    return True


def safe_relative(rel: str) -> bool:
    pure = PurePosixPath(rel)
    return bool(rel) and not pure.is_absolute() and ".." not in pure.parts and "\\" not in rel


class Stager:
    def __init__(self, root: Path, scrubber: Scrubber, log_redactor: Scrubber | None = None):
        self.root = root
        self.scrubber = scrubber
        self.log_redactor = log_redactor or scrubber
        self.entries: dict[str, FileEntry] = {}
        self.omitted: list[dict] = []  # {"path", "reason"}

    def _target(self, rel: str) -> Path:
        if not safe_relative(rel):
            raise ValueError(f"not a relative bundle path: {rel!r}")
        target = self.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def copy(self, src: Path, rel: str, kind: str, run: str | None = None,
             unit: str | None = None) -> FileEntry | None:
        """Copy src to rel; None (and an omission note) when it is missing or empty."""
        with full_disk_named(rel):
            entry = self._copy(src, rel, kind, run)
        if entry is not None and unit:
            entry = FileEntry(entry.path, entry.bytes, entry.sha256, kind, run,
                              entry.source_sha256, unit, entry.redacted)
            self.entries[rel] = entry
        return entry

    def _copy(self, src: Path, rel: str, kind: str, run: str | None) -> FileEntry | None:
        try:
            size = src.stat().st_size
        except OSError:
            self.omitted.append({"path": rel, "reason": "missing"})
            return None
        if size == 0:
            self.omitted.append({"path": rel, "reason": "empty"})
            return None
        if size <= SCRUB_LIMIT:
            with open(src, "rb") as f:
                head = f.read(4096)
            if is_text(head, partial=True):
                return self._copy_text(src, rel, kind, run)
        return self._copy_stream(src, rel, kind, run)

    def _copy_text(self, src: Path, rel: str, kind: str, run: str | None) -> FileEntry:
        """Scrubbed a piece at a time (pieces end at a newline; no path spans one), so a
        run's 200 MB log costs a few MB of memory, not three copies of itself."""
        log = kind in EVIDENCE
        scrubber = self.log_redactor if log else self.scrubber
        if not _all_text(src):
            return self._copy_stream(src, rel, kind, run)
        source, clean, size, rewritten = hashlib.sha256(), hashlib.sha256(), 0, False
        with open(src, "rb") as fin, open(self._target(rel), "wb") as fout:
            for piece in _pieces(fin):
                source.update(piece)
                text = piece.decode("utf-8")  # whole characters: a piece ends at a newline
                after = scrubber.text(text)
                out = after.encode("utf-8") if after != text else piece
                rewritten = rewritten or after != text
                clean.update(out)
                fout.write(out)
                size += len(out)
            fout.flush()
            os.fsync(fout.fileno())
        entry = FileEntry(rel, size, clean.hexdigest(), kind, run,
                          source.hexdigest() if rewritten else None,
                          redacted=log if rewritten else False)
        self.entries[rel] = entry
        return entry

    def _copy_stream(self, src: Path, rel: str, kind: str, run: str | None) -> FileEntry:
        target = self._target(rel)
        digest, size = hashlib.sha256(), 0
        with open(src, "rb") as fin, open(target, "wb") as fout:
            while block := fin.read(CHUNK):
                digest.update(block)
                fout.write(block)
                size += len(block)
            fout.flush()
            os.fsync(fout.fileno())
        entry = FileEntry(rel, size, digest.hexdigest(), kind, run)
        self.entries[rel] = entry
        return entry

    def _write(self, rel: str, data: bytes, kind: str, run: str | None = None) -> FileEntry:
        target = self._target(rel)
        with open(target, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        entry = FileEntry(rel, len(data), hashlib.sha256(data).hexdigest(), kind, run)
        self.entries[rel] = entry
        return entry

    def write_text(self, rel: str, text: str, kind: str, run: str | None = None,
                   scrubber: Scrubber | None = None) -> FileEntry:
        """A file the wrap-up writes itself (report, stops...), scrubbed like a copy."""
        with full_disk_named(rel):
            return self._write(rel, (scrubber or self.scrubber).text(text).encode("utf-8"),
                               kind, run)

    def remove(self, rel: str) -> None:
        self.entries.pop(rel, None)
        (self.root / rel).unlink(missing_ok=True)

    def listing(self) -> list[dict]:
        return [self.entries[k].to_dict() for k in sorted(self.entries)]
